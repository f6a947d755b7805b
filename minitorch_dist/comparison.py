"""Comparing a parallel run with the single-process reference, tensor by tensor.

    compare(ours, reference, shards={"w": Shard(0, rank, 4)}, tolerance=EXACT)
    assert_runs_match(runs, reference_run(...))      # losses, outputs, gradients, weights

:mod:`minitorch_dist.reference` runs the two sides (and re-exports these names); this module says
whether they agree: by name, shape, and value within :data:`EXACT` (fp64: only the order of
additions differs) or :data:`TIGHT` (fp32), taking only the part a rank holds (:class:`Shard`).
A :class:`Run` is what one process recorded. :func:`compare_runs` compares every rank's run with
the reference's, tensor by tensor, as a :class:`Holding` says the technique's ranks hold it (their
part of the outputs, their shards, which parameters); each technique's ``compare_with_reference``
is that call on its runs. :func:`scale_mistake` names a gradient that is right but for a factor
(summed, not averaged, over ranks; an accumulation that overwrote instead of adding).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

__all__ = [
    "EXACT",
    "TIGHT",
    "Comparison",
    "Holding",
    "Run",
    "Shard",
    "assert_runs_match",
    "compare",
    "compare_runs",
    "scale_mistake",
]

# tolerances for torch.testing.assert_close: in fp64 only the order of additions differs
EXACT = {"rtol": 1e-10, "atol": 1e-12}
TIGHT = {"rtol": 1e-5, "atol": 2e-6}  # fp32: the rounding of a sum in another order

CHECKS = ("losses", "outputs", "grads", "weights")


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


@dataclass(frozen=True)
class Holding:
    """How a technique's ranks hold what the single process computed, for :func:`compare_runs`."""

    # rank -> the Shard of the reference's outputs it computed (None: outputs not compared)
    outputs: Callable[[int], Shard | None] | None = None
    # rank -> the Shards of the gradients and weights it holds, by name (None: whole tensors)
    shards: Callable[[int], Mapping[str, Shard]] | None = None
    # "mean": each rank's loss is its slice's, their mean the reference's (a split batch);
    # "each": every rank's loss is the reference's (the whole batch); "none": not compared
    losses: str = "mean"
    # "all": every rank holds every parameter; "some": each rank some, together all of them
    names: str = "all"


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


def compare_runs(
    runs: Sequence[Run | None],
    reference: Run,
    *,
    holding: Holding = Holding(),
    check: Sequence[str] = CHECKS,
    tolerance: Mapping[str, float] | None = None,
) -> list[Comparison | None]:
    """Per rank, a :class:`Comparison` of its :class:`Run` with the single-process ``reference``
    (None for a rank that returned None), with errors named ``loss <k>`` (step k), ``outputs``,
    ``grad <name>`` (the first step) and ``weight <name>`` (after the last step), each taken as
    ``holding`` says the rank holds it. With ``tolerance`` (keyword arguments of
    ``torch.testing.assert_close``; the losses always :data:`TIGHT`) a mismatch raises an
    AssertionError naming the rank and tensor; without, the errors are only measured. With
    ``holding.names == "some"``, the ranks must hold every parameter between them
    (AssertionError otherwise)."""
    present = [(r, run) for r, run in enumerate(runs) if run is not None]
    loss_tol = TIGHT if tolerance is not None else None
    want_losses = torch.tensor(reference.losses, dtype=torch.float64)
    if "losses" in check and holding.losses == "mean":
        mean = torch.tensor([run.losses for _, run in present], dtype=torch.float64).mean(0)
        mean_errors = _loss_errors(mean, want_losses, loss_tol, "")
    results: list[Comparison | None] = [None] * len(runs)
    for rank, run in present:
        label, errors = f"rank {rank}, ", {}
        if "losses" in check and holding.losses == "mean":
            errors |= mean_errors
        elif "losses" in check and holding.losses == "each":
            ours = torch.tensor(run.losses, dtype=torch.float64)
            errors |= _loss_errors(ours, want_losses, loss_tol, label)
        if "outputs" in check and (holding.outputs is not None or len(runs) == 1):
            shard = holding.outputs(rank) if holding.outputs is not None else None
            errors |= compare(
                {"outputs": run.outputs},
                {"outputs": reference.outputs},
                tolerance=tolerance,
                shards={"outputs": shard} if shard else None,
                label=label,
            ).errors
        shards = holding.shards(rank) if holding.shards is not None else None
        for kind, key, ours, full in (
            ("grads", "grad", run.grads, reference.grads),
            ("weights", "weight", run.weights, reference.weights),
        ):
            if kind not in check:
                continue
            want = full if holding.names == "all" else {n: full[n] for n in ours if n in full}
            where = label + ("gradient of " if kind == "grads" else "weight ")
            found = compare(ours, want, shards=shards, tolerance=tolerance, label=where).errors
            errors |= {f"{key} {n}": e for n, e in found.items()}
        results[rank] = Comparison(errors)
    if holding.names == "some":
        kind = "grads" if "grads" in check else "weights"
        held = {n for _, run in present for n in getattr(run, kind)}
        if held != set(getattr(reference, kind)):
            model = sorted(getattr(reference, kind))
            raise AssertionError(f"the ranks hold {sorted(held)}, the model has {model}")
    return results


def _loss_errors(
    ours: torch.Tensor, want: torch.Tensor, tolerance: Mapping[str, float] | None, label: str
) -> dict[str, float]:
    """``loss <k>``: the error of step k's loss (asserted within ``tolerance`` if given)."""
    if tolerance is not None:
        torch.testing.assert_close(ours, want, **tolerance, msg=lambda m: f"{label}losses: {m}")
    return {f"loss {k}": abs(a - b) for k, (a, b) in enumerate(zip(ours.tolist(), want.tolist()))}


def assert_runs_match(
    runs: Sequence[Run | None],
    reference: Run,
    *,
    check: Sequence[str] = CHECKS,
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
    otherwise. :func:`compare_runs` with ``Holding(outputs, shards)``.
    """
    tol = tolerance if tolerance is not None else _tolerance_for(reference)
    compare_runs(runs, reference, holding=Holding(outputs, shards), check=check, tolerance=tol)


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
