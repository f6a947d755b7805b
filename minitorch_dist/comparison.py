"""Comparing a parallel run with the single-process reference, tensor by tensor.

    compare(ours, reference, shards={"w": Shard(0, rank, 4)}, tolerance=EXACT)
    assert_runs_match(runs, reference_run(...))      # losses, outputs, gradients, weights

:mod:`minitorch_dist.reference` runs the two sides (and re-exports these names); this module says
whether they agree: by name, shape, and value within :data:`EXACT` (fp64: only the order of
additions differs) or :data:`TIGHT` (fp32), taking only the part a rank holds (:class:`Shard`).
A :class:`Run` is what one process recorded. :func:`scale_mistake` names a gradient that is
right but for a factor (summed, not averaged, over ranks; an accumulation that overwrote instead
of adding).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

__all__ = [
    "EXACT",
    "TIGHT",
    "Comparison",
    "Run",
    "Shard",
    "assert_runs_match",
    "compare",
    "scale_mistake",
]

# tolerances for torch.testing.assert_close: in fp64 only the order of additions differs
EXACT = {"rtol": 1e-10, "atol": 1e-12}
TIGHT = {"rtol": 1e-5, "atol": 2e-6}  # fp32: the rounding of a sum in another order

# what the model-parallel comparisons (tensor, context, expert parallelism) train by default


@dataclass
class Run:
    """What one process recorded: per-step losses (its own batch's mean), the first step's outputs
    and gradients, the weights after the last step."""

    losses: list[float] = field(default_factory=list)
    outputs: torch.Tensor | None = None
    grads: dict[str, torch.Tensor] = field(default_factory=dict)
    weights: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass(frozen=True)
class Shard:
    """The part of a full tensor one rank holds: chunk ``index`` of ``parts`` along ``dim``
    (``torch.chunk``'s split: column-parallel weights are chunks of dim 0, row-parallel of dim 1,
    a data-parallel rank's outputs chunks of the batch)."""

    dim: int
    index: int
    parts: int

    def of(self, full: torch.Tensor) -> torch.Tensor:
        return full.chunk(self.parts, dim=self.dim)[self.index]


@dataclass
class Comparison:
    """Largest absolute error per tensor name; ``worst`` names the largest of all."""

    errors: dict[str, float]

    @property
    def worst(self) -> str:
        return max(self.errors, key=self.errors.get)

    @property
    def max_abs_error(self) -> float:
        return self.errors[self.worst] if self.errors else 0.0


def compare(
    ours: Mapping[str, torch.Tensor],
    reference: Mapping[str, torch.Tensor],
    *,
    shards: Mapping[str, Shard] | None = None,
    tolerance: Mapping[str, float] | None = None,
    label: str = "",
) -> Comparison:
    """Compare tensors by name: the same names on both sides, ``ours[n]`` equal to
    ``reference[n]`` (or to ``shards[n].of(reference[n])``). With ``tolerance`` (keyword
    arguments of ``torch.testing.assert_close``) a mismatch raises an AssertionError that names
    the tensor; without, only the errors are returned."""
    shards = shards or {}
    if set(ours) != set(reference):
        missing, extra = sorted(set(reference) - set(ours)), sorted(set(ours) - set(reference))
        raise AssertionError(f"{label}names differ: missing {missing}, unexpected {extra}")
    errors = {}
    for name, want in reference.items():
        want = shards[name].of(want) if name in shards else want
        got = ours[name]
        if got.shape != want.shape:
            raise AssertionError(
                f"{label}{name}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
            )
        errors[name] = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
        if tolerance is not None:
            torch.testing.assert_close(
                got, want, **tolerance, msg=lambda m, n=name: f"{label}{n}: {m}"
            )
    return Comparison(errors)


def _tolerance_for(run: Run) -> Mapping[str, float]:
    dtypes = {t.dtype for t in run.weights.values()} | {t.dtype for t in run.grads.values()}
    return EXACT if dtypes == {torch.float64} else TIGHT


def assert_runs_match(
    runs: Sequence[Run | None],
    reference: Run,
    *,
    check: Sequence[str] = ("losses", "outputs", "grads", "weights"),
    outputs: Callable[[int], Shard | None] | None = None,
    shards: Callable[[int], Mapping[str, Shard]] | None = None,
    tolerance: Mapping[str, float] | None = None,
) -> None:
    """Assert that every rank's :class:`Run` matches the single-process ``reference``.

    ``runs`` is in rank order (a rank with nothing to compare returns None). Losses: the mean
    over ranks of their per-step losses equals the reference's (equal slices). ``outputs(rank)``
    gives the :class:`Shard` of the reference's outputs that rank computed (default: none
    compared unless ``world_size == 1``); ``shards(rank)`` the shards of gradients and weights
    (default: full tensors). ``tolerance`` defaults to :data:`EXACT` in fp64, :data:`TIGHT`
    otherwise.
    """
    tol = tolerance if tolerance is not None else _tolerance_for(reference)
    present = [(r, run) for r, run in enumerate(runs) if run is not None]
    if "losses" in check:
        mean = torch.tensor([run.losses for _, run in present], dtype=torch.float64).mean(0)
        torch.testing.assert_close(
            mean,
            torch.tensor(reference.losses, dtype=torch.float64),
            **TIGHT,
            msg=lambda m: f"losses: {m}",
        )
    for rank, run in present:
        label = f"rank {rank}, "
        if "outputs" in check and (outputs is not None or len(runs) == 1):
            shard = outputs(rank) if outputs is not None else None
            compare(
                {"outputs": run.outputs},
                {"outputs": reference.outputs},
                tolerance=tol,
                shards={"outputs": shard} if shard else None,
                label=label,
            )
        rank_shards = shards(rank) if shards is not None else None
        if "grads" in check:
            compare(
                run.grads,
                reference.grads,
                shards=rank_shards,
                tolerance=tol,
                label=label + "gradient of ",
            )
        if "weights" in check:
            compare(
                run.weights,
                reference.weights,
                shards=rank_shards,
                tolerance=tol,
                label=label + "weight ",
            )


def scale_mistake(
    ours: Mapping[str, torch.Tensor],
    reference: Mapping[str, torch.Tensor],
    world_size: int,
    grad_acc: int = 1,
) -> str | None:
    """Name a mistake that only rescales a gradient (or an SGD update), else None.

    ``s = <ours, reference> / <reference, reference>`` over the common names: ``s`` near
    ``world_size`` means the ranks' gradients were summed, not averaged; near ``1 / grad_acc``
    (the micro-batches identical, so each carries ``1 / grad_acc`` of it) that only the last
    micro-batch survived: the accumulated gradient was overwritten (``copy_``), not added
    (``add_``). Adam hides both (it is nearly scale-invariant): check with SGD."""
    names = [n for n in reference if n in ours]
    a = torch.cat([ours[n].detach().double().flatten() for n in names])
    b = torch.cat([reference[n].detach().double().flatten() for n in names])
    if not names or float(b @ b) == 0.0:
        return None
    s = float(a @ b / (b @ b))
    if world_size > 1 and abs(s - world_size) < 0.02 * world_size:
        return (
            f"the gradients are {s:.3f} x the reference's on {world_size} ranks: they were "
            "summed over the ranks, not averaged (divide by the world size)"
        )
    if grad_acc > 1 and abs(s - 1 / grad_acc) < 0.02 / grad_acc:
        return (
            f"the gradient is {s:.3f} x the reference's with {grad_acc} identical "
            "micro-batches: only the last micro-batch's gradient survived; accumulate "
            "into the gradient (add_), do not overwrite it (copy_)"
        )
    return None
