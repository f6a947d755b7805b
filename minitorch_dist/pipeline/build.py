"""Pipeline parallelism as a transform: cut a model into this rank's stage and pair it with a
schedule.

    pipe = apply_pipeline_parallel(model, group, schedule="1f1b", micro_batches=8)
    run = pipe.run(micro_batch_list(batch, 8))          # chapter 9's runtime, on this rank

:func:`build_stage` is the cut alone (rank ``rank`` of ``pp``, ``virtual_stages`` chunks each),
:func:`micro_batch_list` the batch cut into micro-batches as ``grad_acc`` cuts it. The chunks
are :class:`~minitorch_dist.models.LlamaStage` s, parts of the model that the other transforms
(``apply_tensor_parallel``, ``apply_context_parallel``, ...) take as they take a whole model;
chapter 11's ``build_3d`` applies them to each chunk after the cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from minitorch_dist.checks import check_int
from minitorch_dist.comm.groups import Group
from minitorch_dist.models import split_layers, split_model
from minitorch_dist.pipeline.runtime import PipelineRun, run_schedule
from minitorch_dist.pipeline.schedules import Schedule, make_schedule
from minitorch_dist.pipeline.stage import PipelineStage

__all__ = [
    "Pipeline",
    "apply_pipeline_parallel",
    "build_stage",
    "micro_batch_list",
    "stage_parameters",
]

Batch = tuple[torch.Tensor, torch.Tensor]


def build_stage(
    model: nn.Module,
    rank: int,
    pp: int,
    virtual_stages: int = 1,
    *,
    group: Group = None,
    recv_timeout: float = 30.0,
) -> PipelineStage:
    """Rank ``rank``'s :class:`PipelineStage` of ``model`` cut into ``pp * virtual_stages``
    chunks (``split_layers``; a ValueError if there are fewer layers): chunks ``rank``,
    ``rank + pp``, ... ."""
    layers = model.config.layers
    if layers < pp * virtual_stages:
        raise ValueError(
            f"layers={layers} < pp*virtual_stages={pp * virtual_stages}: every "
            "chunk needs at least one layer"
        )
    chunks = split_model(model, split_layers(layers, pp * virtual_stages))
    return PipelineStage(chunks[rank::pp], rank, pp, group, recv_timeout=recv_timeout)


def stage_parameters(stage: PipelineStage) -> dict[str, nn.Parameter]:
    """The stage's parameters under the whole model's names: a chunk's ``layers.j`` is the
    model's ``layers.{start + j}``; ``embed``, ``norm`` and ``head`` keep their names."""
    named = {}
    for chunk in stage.chunks:
        named.update(chunk.model_named_parameters())
    return named


def micro_batch_list(batch: Batch, micro_batches: int) -> list[Batch]:
    """A global batch cut into ``micro_batches`` consecutive parts, as ``grad_acc`` cuts it."""
    inputs, targets = batch
    if inputs.shape[0] % micro_batches:
        raise ValueError(
            f"the batch ({inputs.shape[0]} rows) must divide by micro_batches={micro_batches}"
        )
    return list(zip(inputs.chunk(micro_batches), targets.chunk(micro_batches)))


@dataclass
class Pipeline:
    """What :func:`apply_pipeline_parallel` hands back to one rank: its stage and the schedule."""

    stage: PipelineStage  # this rank's chunks (LlamaStages sharing the model's modules)
    schedule: Schedule  # every rank's action list

    @property
    def chunks(self) -> list[nn.Module]:
        """This rank's parts of the model, for the transforms that follow the cut."""
        return self.stage.chunks

    def named_parameters(self) -> dict[str, nn.Parameter]:
        """This rank's parameters under the whole model's names (:func:`stage_parameters`)."""
        return stage_parameters(self.stage)

    def run(self, micro_batches: Sequence[Batch], **options: Any) -> PipelineRun:
        """One step of the schedule on this rank: :func:`run_schedule` with its ``options``."""
        return run_schedule(self.schedule, self.stage, micro_batches, **options)


def _pp_rank(group: Group) -> tuple[Any, int, int]:
    """(process group, this rank's index, pp) of a process group or a ProcessGrid's pp axis."""
    if hasattr(group, "layout") and callable(getattr(group, "group", None)):  # a ProcessGrid
        return group.group("pp"), group.index("pp"), group.size("pp")
    if not dist.is_initialized():
        return group, 0, 1
    return group, dist.get_rank(group), dist.get_world_size(group)


def apply_pipeline_parallel(
    model: nn.Module,
    group: Group,
    *,
    schedule: str | Schedule,
    micro_batches: int,
    virtual_stages: int = 1,
    recv_timeout: float = 30.0,
) -> Pipeline:
    """Cut ``model`` (built after the same seed on every rank) for the pipeline over ``group``
    (a process group, None for the world, or a ProcessGrid, whose pp axis is used): this rank
    keeps chunks ``rank, rank + pp, ...`` of ``pp * virtual_stages``, which share the model's
    modules, and runs ``schedule`` (a kind of :func:`make_schedule` or a :class:`Schedule`) over
    ``micro_batches``. Returns the :class:`Pipeline`; the model's other layers are not this
    rank's (drop the model to free them)."""
    group, rank, pp = _pp_rank(group)
    check_int("micro_batches", micro_batches)
    if isinstance(schedule, Schedule):
        if (schedule.pp, schedule.micro_batches) != (pp, micro_batches):
            raise ValueError(
                f"the schedule is for pp={schedule.pp}, m={schedule.micro_batches}; "
                f"the group has pp={pp}, micro_batches={micro_batches}"
            )
        virtual_stages = schedule.virtual_stages
    else:
        schedule = make_schedule(schedule, pp, micro_batches, virtual_stages)
    stage = build_stage(model, rank, pp, virtual_stages, group=group, recv_timeout=recv_timeout)
    return Pipeline(stage, schedule)
