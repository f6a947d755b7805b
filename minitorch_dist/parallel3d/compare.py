"""The grid against one process, through the shared harness, and the pitfalls made to happen.

    check = compare_grid_with_reference(dp=2, pp=2, tp=2)      # raises if any rank is off
    check.max_error, check.losses, check.norms                 # what the chapter prints

Every rank builds the tiny Llama after the same seed, distributes it with :func:`build_3d` and
trains ``steps`` steps on its share of the same global batches; the reference
(:func:`~minitorch_dist.reference.reference_run`) trains the whole model on the whole batches
with the same optimizer and ``torch.nn.utils.clip_grad_norm_``. Compared: every rank's loss per
step (every rank reports the global loss), the gradient norm per step before clipping, and every
weight a rank holds after the last step against its slice of the reference's weight
(:func:`~minitorch_dist.tensor_parallel.tp_shards`), under the model's names; the ranks must
hold every parameter between them.

``bug`` runs the same recipe with one deliberate mistake (the chapter's pitfalls); the check
then fails, which is the point: ``"world"`` ZeRO over WORLD instead of dp x cp (pp = 1 grids:
stages of unequal size cannot even share a reduce-scatter), ``"dp_only"`` ZeRO over dp alone
while cp > 1 (the cp ranks' gradients never meet), ``"local_norm"`` the norm reduced over
dp x cp only (not tp, pp), ``"double_count"`` tp-replicated norms summed t times,
``"unscaled_loss"`` each micro-batch's loss not divided by m, ``"rank_seed"`` every rank
initialised from its own seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from minitorch_dist.grid import GridLayout, ProcessGrid, _axes_of
from minitorch_dist.launching.launcher import launch
from minitorch_dist.models import Llama, LlamaConfig
from minitorch_dist.parallel3d import clip
from minitorch_dist.parallel3d.clip import ClippedZeroStage1
from minitorch_dist.parallel3d.recipe import build_3d, rank_micro_batches, train_step
from minitorch_dist.reference import (
    EXACT,
    TIGHT,
    Comparison,
    Holding,
    Run,
    compare,
    compare_runs,
    make_batches,
    reference_run,
)
from minitorch_dist.tensor_parallel import padded_vocab_size, tp_shards
from minitorch_dist.tensor_parallel.measure import full_cross_entropy

__all__ = [
    "BUGS",
    "FP32_ADAM",
    "GridCheck",
    "GridRun",
    "compare_grid_with_reference",
    "grid_rank",
    "reference_with_clip",
]

TINY = LlamaConfig.from_preset("tiny")
# fp32 weights after Adam steps: Adam's first update is lr * g / |g| elementwise, so an element
# whose gradient sits at fp32's rounding level can move by a share of lr whichever run computed
# it; measured, the largest such difference is about 1% of lr (1e-3): the weights are compared
# to 2e-5 (the loss and the norm stay at TIGHT)
FP32_ADAM = {"rtol": 1e-5, "atol": 2e-5}
BUGS = ("world", "dp_only", "local_norm", "double_count", "unscaled_loss", "rank_seed")


@dataclass
class GridCheck:
    """What one comparison found: per rank the largest error per weight, the losses and norms
    per step (rank 0's; every rank has the same), the reference's, and per rank what it held."""

    comparisons: list[Comparison]
    losses: list[float]
    norms: list[float]
    ref_losses: list[float]
    ref_norms: list[float]
    held: list[dict[str, Any]] = field(default_factory=list)

    @property
    def max_error(self) -> float:
        return max(c.max_abs_error for c in self.comparisons)


class _ShardsOnly:
    """The grid as the ``local_norm`` pitfall sees it: its tp and pp groups are this rank alone
    (the ep axis, 1 here), so an all-reduce over them changes nothing."""

    def __init__(self, grid: Any) -> None:
        if grid.size("ep") != 1:
            raise ValueError("the local_norm pitfall needs ep=1 (its group of one rank)")
        self.grid = grid

    def group(self, name: str | tuple[str, ...]) -> Any:
        axes = tuple(a for a in _axes_of(name) if a not in ("tp", "pp"))
        return self.grid.group(axes or "ep")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.grid, name)


def _local_norm(optimizer: Any, grid: Any, counted: list[torch.Tensor]) -> torch.Tensor:
    """Pitfall: the norm of this rank's gradients, summed over the ZeRO shards only: the grid's
    norm (lab11.1's ``grid_grad_norm``) with its tp and pp all-reduces reduced to one rank."""
    return clip.grid_grad_norm(optimizer, _ShardsOnly(grid), counted)


def _apply_bug(model3d: Any, bug: str, opt_kwargs: dict[str, Any]) -> None:
    grid, opt = model3d.grid, model3d.optimizer
    if bug in ("world", "dp_only"):
        group = None if bug == "world" else grid.group("dp")
        model3d.optimizer = ClippedZeroStage1(
            list(model3d.named.values()),
            torch.optim.Adam,
            grid=grid,
            group=group,
            replicated=opt.replicated,
            max_norm=opt.max_norm,
            sync_params=None,
            **opt_kwargs,
        )
    elif bug == "local_norm":
        opt.norm_fn = _local_norm
    elif bug == "double_count":
        opt.replicated, opt._counted = {}, None
    elif bug == "unscaled_loss":
        m, loss_fn = model3d.schedule.micro_batches, model3d.loss_fn
        model3d.loss_fn = lambda logits, target: loss_fn(logits, target) * m  # undoes the 1/m


@dataclass(frozen=True)
class GridRun:
    """What :func:`compare_grid_with_reference` trains (its keyword arguments)."""

    dp: int = 1  # the grid's axes: dp x pp x cp x tp ranks
    pp: int = 1
    cp: int = 1
    tp: int = 1
    dtype: torch.dtype = torch.float64  # fp64: only the order of additions differs
    steps: int = 3  # Adam steps, each clipped to max_norm
    micro_batches: int = 2  # per data-parallel rank and step
    seq_len: int = 16
    lr: float = 1e-3
    max_norm: float | None = 0.5  # None: no clipping
    config: LlamaConfig = TINY  # the model
    bug: str | None = None  # one of BUGS: the recipe with that mistake
    sp: bool = True  # sequence parallelism with tensor parallelism
    timeout: float = 120.0  # seconds for the launch

    @property
    def layout(self) -> GridLayout:
        return GridLayout(dp=self.dp, pp=self.pp, cp=self.cp, tp=self.tp)


def grid_rank(rank: int, world_size: int, run: GridRun, batches: list) -> dict[str, Any]:
    """One rank (``launch``'s function): build, train, return losses, norms, weights, shards."""
    torch.manual_seed(rank if run.bug == "rank_seed" else 0)  # the same model on every rank
    grid = ProcessGrid(dp=run.dp, pp=run.pp, cp=run.cp, tp=run.tp)
    model = Llama(run.config).to(run.dtype)
    # ZeRO would refuse the pitfalls' different weights (zero.sync): sync_params=None lets them
    # train, to show what the mistake does
    unchecked = {"sync_params": None} if run.bug in ("rank_seed", "world") else {}
    model3d = build_3d(
        model,
        grid,
        micro_batches=run.micro_batches,
        seq_len=run.seq_len,
        lr=run.lr,
        max_norm=run.max_norm,
        sp=run.sp,
        **unchecked,
    )
    if run.bug is not None:
        _apply_bug(model3d, run.bug, {"lr": run.lr})
    losses, norms = [], []
    for batch in batches:
        losses.append(train_step(model3d, rank_micro_batches(batch, grid, run.micro_batches)))
        norms.append(model3d.optimizer.last_norm)
    tp, t = grid.size("tp"), grid.index("tp")
    shards = {n: s for n, s in tp_shards(run.config, t, tp).items() if n in model3d.named}
    weights = {n: p.detach().clone() for n, p in model3d.named.items()}
    held = {
        "coords": grid.coords,
        "groups": {g: grid.ranks(g) for g in ("dp", "pp", "cp", "tp", "dp_cp")},
        "names": list(weights),
        "numel": sum(w.numel() for w in weights.values()),
        "zero_shard": sum(u.shard_numel for u in model3d.optimizer.units),
    }
    return {"losses": losses, "norms": norms, "weights": weights, "shards": shards, "held": held}


def reference_with_clip(
    config: LlamaConfig, batches: list, dtype: torch.dtype, lr: float, max_norm: float | None
) -> tuple[Any, list[float]]:
    """The single-process run (Adam, ``clip_grad_norm_`` before each step): (Run, norms)."""
    norms: list[float] = []

    class ClipThenAdam(torch.optim.Adam):
        def step(self, closure: Any = None) -> Any:
            params = [p for g in self.param_groups for p in g["params"]]
            norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm else float("inf"))
            norms.append(float(norm))
            return super().step(closure)

    # the loss in the model's dtype, as the vocab-parallel one computes it (the Llama's own
    # cross_entropy works in fp32 whatever the dtype: no fp64-exact comparison through it)
    run = reference_run(
        lambda: Llama(config),
        lambda ps: ClipThenAdam(ps, lr=lr),
        batches,
        dtype=dtype,
        loss_fn=full_cross_entropy,
    )
    return run, norms


def compare_grid_with_reference(
    run: GridRun | None = None,
    *,
    tolerance: dict[str, float] | None = None,
    strict: bool = True,
    **options: Any,
) -> GridCheck:
    """Train on ``dp * pp * cp * tp`` emulated ranks and on one process; compare (see the module
    docstring). ``options`` replace fields of ``run`` (a :class:`GridRun`: the axes, the
    training, ``bug``, ``sp=False`` to leave sequence parallelism out). Raises an
    AssertionError naming the rank and tensor (or the loss, the norm) beyond ``tolerance``
    (default EXACT in fp64, :data:`FP32_ADAM` for fp32 weights); ``strict=False`` only
    measures (the pitfalls' table: how far off each one is)."""
    run = replace(run or GridRun(), **options)
    config, dtype, bug = run.config, run.dtype, run.bug
    if bug is not None and bug not in BUGS:
        raise ValueError(f"bug must be one of {', '.join(BUGS)} or None, got {bug!r}")
    if bug == "world" and run.pp > 1:
        raise ValueError(
            "bug='world' needs pp = 1: stages of unequal size cannot share a "
            "reduce-scatter (it fails at once instead of training wrong)"
        )
    rows = run.dp * run.micro_batches
    batches = make_batches(config.vocab_size, rows, run.seq_len, run.steps)
    results = launch(grid_rank, run.layout.world_size, run, batches, timeout=run.timeout)
    ref, ref_norms = reference_with_clip(config, batches, dtype, run.lr, run.max_norm)
    tol = tolerance if tolerance is not None else (EXACT if dtype == torch.float64 else FP32_ADAM)
    tol = tol if strict else None
    vp = padded_vocab_size(config.vocab_size, run.tp)
    ref.weights = {  # the embedding and head padded with zero rows, as the tp ranks hold them
        n: torch.cat([w, w.new_zeros(vp - w.shape[0], *w.shape[1:])])
        if n in ("embed.weight", "head.weight")
        else w
        for n, w in ref.weights.items()
    }
    # every rank reports the global loss and holds its stage's tp slices of some weights;
    # checked in the order a mistake shows first: the losses, the gradient norms, the weights
    runs = [Run(losses=r["losses"], weights=r["weights"]) for r in results]
    holding = Holding(shards=lambda rank: results[rank]["shards"], losses="each", names="some")
    compare_runs(runs, ref, holding=holding, check=("losses",), tolerance=tol)
    norms_tol = (EXACT if dtype == torch.float64 else TIGHT) if strict else None
    for rank, r in enumerate(results):
        compare(
            {"gradient norm": torch.tensor(r["norms"], dtype=torch.float64)},
            {"gradient norm": torch.tensor(ref_norms, dtype=torch.float64)},
            tolerance=norms_tol,
            label=f"rank {rank}, ",
        )
    comparisons = compare_runs(runs, ref, holding=holding, check=("weights",), tolerance=tol)
    return GridCheck(
        comparisons,
        results[0]["losses"],
        results[0]["norms"],
        ref.losses,
        ref_norms,
        [r["held"] for r in results],
    )
