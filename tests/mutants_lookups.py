""" "Solutions" made only of what a student edition ships, one or more per graded task
(tests/test_no_reference.py grades each and requires a failure).

Two kinds:

- ``lookup``: the task's functions answer from the expected values the edition stores (the
  fixtures in tests/fixtures/, the literal values of the graded tests, the docstrings' examples),
  and elsewhere fall back on the nearest stored answer (or an obvious guess);
- ``stand-in``: the task's functions produce the values the graded tests compare with by the
  means those tests use to compute them (torch's own collective or layer, the single-process
  model, an earlier lab's code that ships), without the technique the task asks for.

A graded test that checks only stored values, or only values, lets one of them through.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.pipeline.schedules import Action

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@dataclass(frozen=True)
class Attack:
    task: str
    name: str  # "lookup-..." or "stand-in-...": the test id
    source: str  # what of the edition it is built from
    replacements: dict  # {"module:Qualname": the replacement}
    message: str  # regex: the failing test's output names why (a fixed phrase of the test)


def _nearest(table: dict, key: tuple) -> Any:
    """The stored answer whose key shares the most fields with ``key``: what a table falls back
    on for a call it does not hold."""
    best = max(table, key=lambda k: sum(a == b for a, b in zip(k, key)))
    return table[best]


# -- lab00.1 ------------------------------------------------------------------------------------
def _all_reduce_library(tensor: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(tensor)  # how the graded test computes the sum it expects
    return tensor


# -- lab01.1: the model-state bytes the tests print ------------------------------------------------
_PER_PARAM = {  # (recipe, optimizer): params, grads, optimizer bytes (test_memory_estimate.py)
    ("mixed", "adam"): (2, 2, 12),
    ("mixed_fp32_grads", "adam"): (2, 6, 12),
    ("fp32", "adam"): (4, 4, 8),
    ("mixed", "sgd"): (2, 2, 4),
    ("mixed", "sgd_momentum"): (2, 2, 8),
    ("fp32", "sgd"): (4, 4, 0),
    ("fp32", "sgd_momentum"): (4, 4, 4),
    ("mixed_fp32_grads", "sgd"): (2, 6, 4),
}
_PSI = 7_500_000_000
_STATES = {  # (num_params, zero_stage, dp, offload): params, grads, optimizer, offloaded
    (1000, 0, 1, False): (2000, 2000, 12000, 0),
    (10, 1, 4, False): (20, 20, 36, 0),
    (10, 2, 4, False): (20, 6, 36, 0),
    (10, 3, 4, False): (6, 6, 36, 0),
    (1000, 0, 1, True): (2000, 2000, 0, 12000),
    (1000, 2, 8, True): (2000, 250, 0, 1500),
    (_PSI, 1, 64, False): (2 * _PSI, 2 * _PSI, 12 * _PSI // 64, 0),
    (_PSI, 2, 64, False): (2 * _PSI, 2 * _PSI // 64, 12 * _PSI // 64, 0),
    (_PSI, 3, 64, False): (2 * _PSI // 64, 2 * _PSI // 64, 12 * _PSI // 64, 0),
}


def _bytes_per_param_lookup(recipe: str = "mixed", optimizer: str = "adam") -> dict[str, int]:
    p, g, o = _PER_PARAM[recipe, optimizer]
    return {"params": p, "grads": g, "optimizer": o, "total": p + g + o}


def _model_state_lookup(
    num_params: int,
    *,
    zero_stage: int = 0,
    dp: int = 1,
    recipe: str = "mixed",
    optimizer: str = "adam",
    offload: bool = False,
) -> dict[str, int]:
    per = _bytes_per_param_lookup(recipe, optimizer)
    key = (num_params, zero_stage, dp, offload)
    if zero_stage == 0 and not offload:  # the stored bytes per parameter, times the count
        p, g, o, off = per["params"] * num_params, per["grads"] * num_params, 0, 0
        o = per["optimizer"] * num_params
    else:
        stored = _STATES.get(key) or _nearest(_STATES, key)
        scale = num_params / key[0] if key not in _STATES else 1
        p, g, o, off = (round(v * scale) for v in stored)
    return {"params": p, "grads": g, "optimizer": o, "total": p + g + o, "offloaded": off}


# -- lab01.2: the activation bytes the tests print -------------------------------------------------
_GPT3_LAYER = 855_638_016 + 2_013_265_920  # 34 sbh + 5 a s^2 b at b = 1, GPT-3 (the docstring)


def _activation_lookup(
    *,
    seq_len: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    layers: int = 1,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    cp: int = 1,
) -> int:
    sbh = seq_len * micro_batch * hidden
    if recompute == "full":
        return layers * 2 * sbh // (tp if sp else 1)
    if recompute == "selective":
        return layers * (34 * sbh // tp if sp else 10 * sbh + 24 * sbh // tp)
    return layers * micro_batch * _GPT3_LAYER // tp  # the stored GPT-3 layer, scaled


_BREAKDOWN = {"blocks": 2 * 82_304, "rope": 1_024, "final_norm": 12_352, "loss": 16_520}


def _breakdown_lookup(
    config: Any,
    *,
    seq_len: int,
    micro_batch: int,
    dtype_bytes: int = 2,
    recompute: str = "none",
    cp: int = 1,
) -> dict[str, int]:
    # the hand count at b = 2, s = 8, fp32, scaled to the call's sizes
    scale = seq_len * micro_batch * dtype_bytes / (8 * 2 * 4)
    return {k: round(v * scale) for k, v in _BREAKDOWN.items()}


# -- lab08.4 and lab09.2: the stored fixtures -----------------------------------------------------
def _shard_positions_lookup(
    seq_len: int, rank: int, world_size: int, *, layout: str = "zigzag"
) -> torch.Tensor:
    if layout == "contiguous":
        return torch.arange(seq_len).chunk(world_size)[rank].clone()
    halves = json.loads((FIXTURES / "zigzag.json").read_text())[str(world_size)][rank]
    half = seq_len // (2 * world_size)  # the stored half-chunk indices, each half this long
    return torch.cat([torch.arange(h * half, (h + 1) * half) for h in halves])


def _stored_schedule(kind: str) -> Any:
    def lookup(rank: int, pp: int, m: int, v: int) -> list[Action]:
        stored = json.loads((FIXTURES / "schedules.json").read_text())[kind]
        key = f"{pp},{m}" if kind == "1f1b" else f"{pp},{m},{v}"
        if key not in stored:  # the stored schedule of as many ranks, the most micro-batches
            same = [k for k in stored if k.split(",")[0] == str(pp)] or list(stored)
            key = max(same, key=lambda k: int(k.split(",")[1]))
        out = []
        for name in stored[key][min(rank, len(stored[key]) - 1)]:
            mb, _, chunk = name[1:].partition(".")
            if int(mb) < m and int(chunk or 0) < v:
                out.append(Action(name[0], int(mb), int(chunk or 0)))
        return out

    return lookup


# -- lab09.3 and lab09.4: the simulator's stored timelines ------------------------------------------
def _simulate_lookup(schedule: Any, t_forward: float = 1.0, t_backward: float = 2.0, t_weight=None):  # noqa: ANN001, ANN201
    from minitorch_dist.pipeline.simulate import SimResult

    pp, m, v = schedule.pp, schedule.micro_batches, schedule.virtual_stages
    makespan = (m + pp - 1) * (t_forward + t_backward)  # the bubble formula the tests print
    busy = [m * (t_forward + t_backward)] * pp
    return SimResult([], makespan, [min(pp - r, m * v) for r in range(pp)], busy)


def _zb_h1_as_1f1b(rank: int, pp: int, m: int, v: int) -> list[Action]:
    # 1F1B's stored lists, each B followed at once by its W (no W delayed into the drain)
    out = []
    for a in _stored_schedule("1f1b")(rank, pp, m, 1):
        out.append(a)
        if a.op == "B":
            out.append(Action("W", a.micro_batch, a.chunk))
    return out


# -- lab10.1 and lab10.2: the held examples --------------------------------------------------------
def _top_k_lookup(logits: torch.Tensor, k: int, *, normalize: bool = True):  # noqa: ANN202
    probs = logits.float().softmax(-1)  # the tests' own expected probabilities
    experts = torch.tensor([[1, 2], [0, 3]]) if tuple(logits.shape) == (2, 4) and k == 2 else None
    if experts is None:
        experts = probs.topk(k, -1).indices  # torch.topk, as the tests' docstring names it
    weights = probs.gather(-1, experts)
    if normalize:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights, experts, probs


_CAPACITY = {  # (tokens, experts, cf, top_k, min_capacity): C, as test_expert_capacity_values
    (10, 4, 1.0, 1, 0): 3,
    (6, 4, 1.0, 2, 0): 3,
    (64, 4, 1.25, 2, 0): 40,
    (1000, 10, 1.1, 1, 0): 110,
    (8, 4, 1.0, 1, 4): 4,
    (8, 4, 2.0, 1, 1): 4,
}


def _capacity_lookup(
    tokens: int, experts: int, capacity_factor: float, *, top_k: int = 1, min_capacity: int = 0
) -> int:
    if capacity_factor <= 0:
        raise ValueError(f"capacity_factor must be a number > 0, got {capacity_factor}")
    if top_k > experts:
        raise ValueError(f"top_k={top_k} exceeds experts={experts}")
    key = (tokens, experts, capacity_factor, top_k, min_capacity)
    return _CAPACITY.get(key) or _nearest(_CAPACITY, key)


def _apply_capacity_lookup(
    expert_indices: torch.Tensor, experts: int, capacity: int
) -> torch.Tensor:
    held = torch.tensor([[0, 1], [0, 2], [0, 1], [1, 0]])
    if capacity == 2 and torch.equal(expert_indices, held):
        return torch.tensor([[True, True], [True, True], [False, True], [False, False]])
    return torch.full(expert_indices.shape, capacity > 0)  # the held C = 0 and C = 4 answers


ATTACKS: list[Attack] = [
    Attack(
        "lab00.1",
        "stand-in-dist-all-reduce",
        "the graded test's own sum: dist.all_reduce",
        {"minitorch_dist.comm.halves:all_reduce_by_halves": _all_reduce_library},
        r"not dist.all_reduce",
    ),
    Attack(
        "lab01.1",
        "lookup-printed-states",
        "the bytes per parameter and the states printed in test_memory_estimate.py",
        {
            "minitorch_dist.memory.estimate:bytes_per_param": _bytes_per_param_lookup,
            "minitorch_dist.memory.estimate:model_state_bytes": _model_state_lookup,
        },
        r"drawn for this run",
    ),
    Attack(
        "lab01.2",
        "lookup-printed-activations",
        "GPT-3's per-layer bytes and the tiny Llama's hand count in test_memory_estimate.py",
        {
            "minitorch_dist.memory.estimate:activation_bytes": _activation_lookup,
            "minitorch_dist.memory.estimate:llama_activation_breakdown": _breakdown_lookup,
        },
        r"drawn for this run",
    ),
    Attack(
        "lab08.4",
        "lookup-zigzag-fixture",
        "tests/fixtures/zigzag.json",
        {"minitorch_dist.context_parallel.layout:shard_positions": _shard_positions_lookup},
        r"not stored",
    ),
    Attack(
        "lab09.2",
        "lookup-schedules-fixture",
        "tests/fixtures/schedules.json",
        {
            "minitorch_dist.pipeline.schedules:_one_f_one_b": _stored_schedule("1f1b"),
            "minitorch_dist.pipeline.schedules:_interleaved": _stored_schedule("interleaved"),
        },
        r"warm-up forwards",
    ),
    Attack(
        "lab09.3",
        "lookup-bubble-formula",
        "the GPipe makespan and peaks the tests print",
        {"minitorch_dist.pipeline.simulate:simulate": _simulate_lookup},
        r"makespan",
    ),
    Attack(
        "lab09.4",
        "lookup-stored-1f1b-plus-w",
        "tests/fixtures/schedules.json's 1F1B lists, a W after each B",
        {"minitorch_dist.pipeline.schedules:_zb_h1": _zb_h1_as_1f1b},
        r"W passes",
    ),
    Attack(
        "lab10.1",
        "lookup-held-route",
        "the held example's experts, torch.topk elsewhere",
        {"minitorch_dist.models.routing:top_k_route": _top_k_lookup},
        r"tie",
    ),
    Attack(
        "lab10.2",
        "lookup-held-capacities",
        "test_expert_capacity_values' table and the held example's kept choices",
        {
            "minitorch_dist.models.capacity:expert_capacity": _capacity_lookup,
            "minitorch_dist.models.routing:apply_capacity": _apply_capacity_lookup,
        },
        r"capacity",
    ),
]
