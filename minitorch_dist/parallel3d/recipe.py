"""The recipe: one Llama trained on a dp x pp x cp x tp grid, composed from the chapters' pieces.

    grid = ProcessGrid(dp=2, pp=2, tp=2)                      # inside launch(): 8 ranks
    model3d = build_3d(Llama(cfg), grid, micro_batches=2, seq_len=16, lr=1e-2, max_norm=1.0)
    loss = train_step(model3d, rank_micro_batches(batch, grid, 2))

Nothing here is a new technique, and no forward is defined here: the recipe calls the chapters'
transforms -- ``apply_pipeline_parallel`` (chapter 9), ``apply_tensor_parallel`` (chapter 7),
``apply_context_parallel`` (chapter 8) -- on the model and its stage, then ZeRO-1 (chapter 6);
the stage runs the model's one forward. What this module adds is the ORDER in which they wrap
the model, the GROUP each one
talks over, and the two things that only exist once they are composed: a gradient norm that is
reduced over the whole grid (:mod:`minitorch_dist.parallel3d.clip`) and a loss every rank knows.
torchtitan's ``parallelize_llama`` and Megatron-LM's ``get_model`` + ``finalize_model_grads`` do
the same, in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.checks import check_divisible, check_int
from minitorch_dist.comm.groups import Group
from minitorch_dist.context_parallel import ShardPositions, apply_context_parallel, shard_sequence
from minitorch_dist.models import Llama, LlamaStage
from minitorch_dist.parallel3d.clip import ClippedZeroStage1, tp_replicated
from minitorch_dist.pipeline import (
    PipelineStage,
    apply_pipeline_parallel,
    micro_batch_list,
    run_schedule,
)
from minitorch_dist.pipeline.schedules import Schedule
from minitorch_dist.reference import Batch, batch_slice
from minitorch_dist.tensor_parallel import apply_tensor_parallel, tp_loss_fn

__all__ = ["GridModel", "GridStage", "build_3d", "rank_micro_batches", "train_step"]


class GridStage(LlamaStage):
    """A pipeline stage (chapter 9's :class:`LlamaStage`) that knows the whole sequence: its
    ``positions`` hook (:class:`~minitorch_dist.context_parallel.ShardPositions`) gives RoPE this
    cp rank's positions (laid out by ``layout``) in a sequence of ``seq_len`` tokens, which a
    stage fed context- and sequence-parallel shards cannot read from its input's shape. Kept for
    callers that cut by hand; :func:`build_3d` sets the same hook with ``apply_context_parallel``.
    """

    def __init__(
        self, model: Llama, start: int, stop: int, *, seq_len: int, cp_group: Group, layout: str
    ) -> None:
        super().__init__(model, start, stop)
        self.seq_len, self.cp_group, self.layout = seq_len, cp_group, layout
        self.positions = ShardPositions(cp_group, layout, seq_len)


@dataclass
class GridModel:
    """What :func:`build_3d` hands back to one rank: its stage, optimizer, schedule and loss."""

    grid: Any  # the ProcessGrid
    stage: PipelineStage  # this rank's layers, cut over tp (and cp)
    optimizer: ClippedZeroStage1  # ZeRO-1 over dp x cp, with the grid-wide gradient norm
    schedule: Schedule  # 1F1B over the pp group
    loss_fn: Any  # vocab-parallel cross-entropy over the tp group (mean over local tokens)
    activation_shape: tuple[int, ...]  # what crosses a stage boundary: (b, s/(cp t), h)
    named: dict[str, torch.nn.Parameter]  # this rank's parameters under the model's names


def build_3d(
    model: Llama,
    grid: Any,
    *,
    micro_batches: int,
    seq_len: int,
    micro_batch_size: int = 1,
    sp: bool = True,
    layout: str = "zigzag",
    optimizer_class: type[torch.optim.Optimizer] = torch.optim.Adam,
    max_norm: float | None = None,
    vocab_multiple: int = 128,
    **optimizer_kwargs: Any,
) -> GridModel:
    """Distribute ``model`` (built after the same seed on every rank) over ``grid`` in place:
    this rank keeps its pipeline stage's layers, cut over tp (with ``sp``), attention over cp,
    and a ZeRO-1 optimizer (``optimizer_class``, ``optimizer_kwargs``; clipping to ``max_norm``)
    over dp x cp. ValueError when the model does not fit the grid."""
    pp, tp, cp = grid.size("pp"), grid.size("tp"), grid.size("cp")
    config = model.config
    check_int("micro_batches", micro_batches)
    if config.layers < pp:
        raise ValueError(f"layers={config.layers} < pp={pp}: every stage needs a layer")
    check_divisible("seq_len", seq_len, "2 * cp (the zig-zag layout's chunks)", 2 * cp)
    if sp:
        check_divisible("seq_len / cp", seq_len // cp, "tp (sequence parallelism)", tp)
    tp_group, cp_group = grid.group("tp"), grid.group("cp")
    # BEGIN SOLUTION lab11.1: cut into stages, tp inside each, cp's attention, ZeRO-1 over dp x cp
    # 1. Pipeline first: the cut is made on whole Blocks and under the model's own names, so
    #    this rank keeps only its stage's layers and every later transform touches only those.
    pipeline = apply_pipeline_parallel(
        model, grid.group("pp"), schedule="1f1b", micro_batches=micro_batches
    )
    (stage,) = pipeline.chunks
    # 2. Tensor (+ sequence) parallelism inside the stage, over the tp group (innermost, fast
    #    links): chapter 7's transform, on the stage as on a whole model.
    apply_tensor_parallel(stage, tp_group, sp=sp, vocab_multiple=vocab_multiple)
    # 3. Context parallelism: each attention core becomes ring attention over the cp group (the
    #    shards are whole heads of tp, so the ring runs per tp rank on its own heads), RoPE takes
    #    the whole sequence's positions; its gradients are left to ZeRO, which reduces over dp x cp.
    if cp > 1:
        apply_context_parallel(stage, cp_group, layout=layout, sync_grads=False)
    named = stage.model_named_parameters()  # the new (sliced) parameters, model's names
    # 4. ZeRO-1 last, over dp x cp: those ranks hold the same (tp-sliced, stage-cut) weights and
    #    saw different tokens, so their gradients are averaged -- and only theirs (never WORLD).
    optimizer = ClippedZeroStage1(
        list(named.values()),
        optimizer_class,
        grid=grid,
        group=grid.group("dp_cp"),
        max_norm=max_norm,
        replicated=tp_replicated(stage, tp_group),
        **optimizer_kwargs,
    )
    # END SOLUTION
    tokens = seq_len // cp // (tp if sp else 1)  # what one boundary message holds per row
    return GridModel(
        grid=grid,
        stage=pipeline.stage,
        optimizer=optimizer,
        schedule=pipeline.schedule,
        loss_fn=tp_loss_fn(tp_group, config.vocab_size),
        activation_shape=(micro_batch_size, tokens, config.hidden),
        named=named,
    )


def rank_micro_batches(
    batch: Batch, grid: Any, micro_batches: int, layout: str = "zigzag"
) -> list[Batch]:
    """This rank's share of a global batch: its dp replica's rows, cut into ``micro_batches``,
    each row's tokens (and labels) sharded over cp by ``layout``; tp and pp ranks see the same."""
    dp, cp = grid.size("dp"), grid.size("cp")
    inputs = batch_slice(batch[0], grid.index("dp"), dp)  # (gbs/dp, s)
    targets = batch_slice(batch[1], grid.index("dp"), dp)

    def shard(t: torch.Tensor) -> torch.Tensor:
        return shard_sequence(t, grid.index("cp"), cp, layout=layout, dim=1)  # (b, s/cp)

    return [(shard(x), shard(y)) for x, y in micro_batch_list((inputs, targets), micro_batches)]


def train_step(model3d: GridModel, micro_batches: Sequence[Batch]) -> float:
    """One optimizer step on this rank's ``micro_batches``; returns the global batch's mean loss,
    the same on every rank."""
    grid = model3d.grid
    # BEGIN SOLUTION lab11.1: 1F1B over pp, the step's loss shared by all ranks, the ZeRO-1 step
    model3d.optimizer.zero_grad()
    run = run_schedule(
        model3d.schedule,
        model3d.stage,
        list(micro_batches),
        loss_fn=model3d.loss_fn,
        activation_shape=lambda inputs: model3d.activation_shape,
    )
    # the last stage's losses are already divided by m (inside the pipeline): their SUM is this
    # replica's mean; the mean over dp x cp replicas is the global mean; pp shares it
    loss = torch.tensor([run.loss if run.loss is not None else 0.0], dtype=torch.float64)
    dist.all_reduce(loss, group=grid.group("dp_cp"))
    loss /= grid.size("dp_cp")
    dist.all_reduce(loss, group=grid.group("pp"))  # only the last stage's is not zero
    model3d.optimizer.step()  # reduce-scatter over dp x cp, clip on the grid-wide norm, update
    # END SOLUTION
    return loss.item()
