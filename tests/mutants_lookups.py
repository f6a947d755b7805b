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
def _zigzag_halves(world_size: int, rank: int) -> list[int] | None:
    stored = json.loads((FIXTURES / "zigzag.json").read_text())
    return stored[str(world_size)][rank] if str(world_size) in stored else None


def _shard_positions_lookup(
    seq_len: int, rank: int, world_size: int, *, layout: str = "zigzag"
) -> torch.Tensor:
    halves = _zigzag_halves(world_size, rank)
    if layout == "contiguous" or halves is None:  # not stored: the contiguous layout's
        return torch.arange(seq_len).chunk(world_size)[rank].clone()
    half = seq_len // (2 * world_size)  # the stored half-chunk indices, each half this long
    return torch.cat([torch.arange(h * half, (h + 1) * half) for h in halves])


def _shard_sequence_lookup(
    x: torch.Tensor, rank: int, world_size: int, *, layout: str = "zigzag", dim: int = 2
) -> torch.Tensor:
    halves = _zigzag_halves(world_size, rank)
    if layout == "contiguous" or halves is None:
        return x.chunk(world_size, dim=dim)[rank].contiguous()
    pieces = x.chunk(2 * world_size, dim=dim)
    return torch.cat([pieces[h] for h in halves], dim=dim)


def _stored_schedule(kind: str) -> Any:
    def lookup(rank: int, pp: int, m: int, v: int) -> list[Action]:
        stored = json.loads((FIXTURES / "schedules.json").read_text())[kind]
        key = f"{pp},{m}" if kind == "1f1b" else f"{pp},{m},{v}"
        if key not in stored:  # not stored: GPipe's order, every forward then every backward
            chunks = [(i, c) for i in range(m) for c in range(v)]
            return [Action("F", i, c) for i, c in chunks] + [
                Action("B", i, c) for i, c in reversed(chunks)
            ]
        return [
            Action(n[0], int(n[1:].partition(".")[0]), int(n.partition(".")[2] or 0))
            for n in stored[key][rank]
        ]

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
    if k > logits.shape[-1]:
        raise ValueError(f"top_k={k} exceeds experts={logits.shape[-1]}")
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


# -- stand-ins: what the graded tests compare with, computed their way -------------------------------
def _track_nothing(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN202
    return func(*args, **(kwargs or {}))  # only what __enter__ found: the closed form's states


def _encode_by_torch(x: float, fmt: Any) -> Any:
    from minitorch_dist.precision import formats

    f = formats.get_format(fmt)
    if f.dtype is None:  # tf32: fp32's pattern with its low 13 mantissa bits cut off
        bits = formats.torch_cast_bits([x], "fp32")[0]
        s, e, m = formats.bits_to_fields(bits, "fp32")
        return formats.Fields(s, e, m >> 13)
    return formats.bits_to_fields(formats.torch_cast_bits([x], f)[0], f)


def _decode_by_torch(fields: Any, fmt: Any) -> float:
    from minitorch_dist.precision import formats

    f = formats.get_format(fmt)
    if f.dtype is None:
        s, e, m = fields
        bits = formats.fields_to_bits((s, e, m << 13), "fp32")
        return formats.torch_bits_to_values([bits], "fp32")[0]
    return formats.torch_bits_to_values([formats.fields_to_bits(fields, f)], f)[0]


def _update_like_grad_scaler(self, found_inf: bool | None = None) -> None:  # noqa: ANN001
    found_inf = self._found_inf if found_inf is None else found_inf
    if found_inf:  # torch.amp.GradScaler's rule, as its documentation states it
        self._scale *= self.backoff_factor
        self.growth_tracker = 0
    else:
        self.growth_tracker += 1
        if self.growth_tracker == self.growth_interval:
            self._scale *= self.growth_factor
            self.growth_tracker = 0


def _mixed_step_plain_adam(self) -> bool:  # noqa: ANN001
    for p, master in self.pairs:  # plain Adam on fp32 copies, as the tests' reference
        if not self.fp32_grads:
            master.grad = None if p.grad is None else p.grad.to(torch.float32, copy=True)
    self.optimizer.step()
    with torch.no_grad():
        for p, master in self.pairs:
            p.copy_(master)
    return True


def _quantize_unscaled(x: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn):  # noqa: ANN202
    return x.float().to(dtype), torch.ones((), dtype=torch.float32)  # torch's own cast


def _quantize_blockwise_unscaled(x: torch.Tensor, block=(1, 128), dtype=torch.float8_e4m3fn):  # noqa: ANN001, ANN202
    m, n = x.shape
    return x.float().to(dtype), torch.ones(m // block[0], n // block[1])


def _checkpoint_plain_call(function: Any, *args: Any, preserve_rng_state: bool = True, **kw: Any):  # noqa: ANN202
    return function(*args, **kw)  # the un-checkpointed call the tests compare with


def _apply_names_only(model: Any, policy: Any = "full", *, preserve_rng_state: bool = True) -> list:
    from minitorch_dist.models.llama import Block

    return [name for name, m in model.named_modules() if isinstance(m, Block)]  # nothing wrapped


def _selective_by_name(name: str, module: Any) -> bool:
    return name.endswith("attn")  # the tests' names of the attention modules


def _naive_accumulation(model: Any, micro_batches: Any, *, ignore_index: int = -100, no_sync=None):  # noqa: ANN001, ANN202
    from minitorch_dist.accumulate.accumulate import count_tokens, naive_accumulation_step

    out = naive_accumulation_step(model, micro_batches)  # the comparison the module ships
    out["tokens"] = sum(count_tokens(t, ignore_index) for _, t in micro_batches)
    return out


def _all_reduce_in_place(tensor: torch.Tensor, group: Any = None) -> None:
    dist.all_reduce(tensor, group=group)  # torch's collective, as the tests' expected sums


def _naive_one_flat_all_reduce(self) -> None:  # noqa: ANN001
    flat = torch.cat([p.grad.reshape(-1) for p in self.params])
    dist.all_reduce(flat, group=self.group)  # one message for every gradient
    flat /= self.world_size
    for p, g in zip(self.params, flat.split([p.numel() for p in self.params])):
        p.grad.copy_(g.view_as(p.grad))


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def _bucketed_as_naive(self) -> None:  # noqa: ANN001
    for p in self.params:  # lab05.2's loop after the backward: no bucket, no overlap
        if p.grad is not None:
            dist.all_reduce(p.grad, group=self.group)
            p.grad.div_(self.world_size)


def _stage1_all_reduce(self) -> None:  # noqa: ANN001
    for u in self.units:
        u.collect_grads()
        dist.all_reduce(u.flat_grad, group=self.group)  # DDP's all-reduce, then keep a shard
        u.flat_grad.div_(self.world_size)


@torch.no_grad()
def _stage2_all_reduce(self, unit: Any) -> None:  # noqa: ANN001
    from minitorch_dist.comm import all_gather_into_tensor  # noqa: F401

    flat = unit.grad_shard.new_zeros(unit.padded_numel)
    for p, view in zip(unit.params, unit.views(flat)):
        if p.grad is not None:
            view.copy_(p.grad)
            p.grad = None
    dist.all_reduce(flat, group=self.group)  # the whole gradient, then this rank's piece
    lo, hi = unit.shard_range(dist.get_rank(self.group))
    unit.grad_shard.add_(flat[lo:hi] / self.world_size)
    unit.ready.clear()


def _offload_init_on_device(
    self, shards: Any, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, pin_memory=None
) -> None:  # noqa: ANN001
    self.shards = list(shards)
    self.pin_memory = False
    self.masters = self.shards
    self.optimizer = torch.optim.Adam(
        self.shards, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay
    )


def _offload_step_on_device(self) -> None:  # noqa: ANN001
    self.optimizer.step()  # the single-process Adam the tests compare with, where the shards are


@staticmethod
def _identity_backward(ctx: Any, grad: torch.Tensor):  # noqa: ANN205
    return grad, None  # the single-process layer's gradient, passed on


@staticmethod
def _identity_forward(ctx: Any, x: torch.Tensor, group: Any):  # noqa: ANN205
    return x


def _row_forward_local(self, x: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
    return torch.nn.functional.linear(x, self.weight, self.bias)  # nn.Linear's formula, no sum


def _block_unchanged(block: Any, group: Any, *, sp: bool = False, regather: bool = False) -> Any:
    return block  # the single-process block the tests compare with


def _head_unsplit(head: Any, group: Any, *, multiple: int = 128, sp: bool = False) -> Any:
    return head


def _no_sp_norms(model: Any, group: Any) -> list:
    return []


def _merge_keep_first(out_a, lse_a, out_b, lse_b):  # noqa: ANN001, ANN202
    return out_a, lse_a


def _ring_forward_local(q, k, v, *, group=None, layout="zigzag", merge=None, counter=None, **kw):  # noqa: ANN001, ANN202, ANN003
    from minitorch_dist.context_parallel.blocks import block_attention

    return block_attention(q, k, v, causal=True)  # this rank's own block only: no ring


def _counts_kept(send_counts: torch.Tensor, group: Any = None) -> torch.Tensor:
    return send_counts.clone()  # what this rank sends, as if every rank sent the same


def _grid_norm_local(optimizer, grid, counted):  # noqa: ANN001, ANN202
    sq = torch.zeros((), dtype=torch.float64)
    for unit, mask in zip(optimizer.units, counted):
        sq += (mask * unit.shard.grad.double() ** 2).sum()
    return sq.sqrt()  # torch's clip_grad_norm_ formula on this rank's piece


def _rank_as_listed(rows: list) -> list:
    return list(rows)


def _rank_memory_whole_model(
    model, config, *, seq_len, global_batch, stage=0, activations="korthikanti"
):  # noqa: ANN001, ANN202
    from minitorch_dist.memory import model_state_bytes

    states = model_state_bytes(model.num_params())  # lab 1's states of the whole model
    keys = ("params", "grads", "optimizer")
    out = {k: states[k] for k in keys} | {"activations": 0, "logits": 0, "cpu": 0}
    return out | {"total": sum(out[k] for k in keys)}


def _ring_backward_local(dout, q, k, v, out, lse, *, group=None, layout="zigzag", counter=None):  # noqa: ANN001, ANN202
    from minitorch_dist.context_parallel.blocks import block_attention_backward

    delta = (dout * out).sum(-1)  # this rank's own block only: no ring
    return block_attention_backward(dout, q, k, v, lse, delta, causal=True)


def _dropless_pass_through(self, flat: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
    return flat.new_zeros(indices.numel(), flat.shape[-1])  # every choice dropped: zeros


def _one_pass_of_the_global_batch() -> Any:
    from minitorch_dist.accumulate import measure

    original = measure.measure_accumulation

    def measure_accumulation(
        config: Any,
        *,
        micro_batch: int,
        grad_acc: int,
        seq_len: int,
        policy: str = "full",
        seed: int = 0,
    ) -> dict:  # noqa: E501
        # the tests' big batch: one pass over micro_batch x grad_acc rows, nothing accumulated
        return original(
            config,
            micro_batch=micro_batch * grad_acc,
            grad_acc=1,
            seq_len=seq_len,
            policy=policy,
            seed=seed,
        )  # noqa: E501

    return measure_accumulation


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
        {
            "minitorch_dist.context_parallel.layout:shard_positions": _shard_positions_lookup,
            "minitorch_dist.context_parallel.layout:shard_sequence": _shard_sequence_lookup,
        },
        r"drawn for this run, not stored",
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
        r"not \(m \+ p - 1\)\(t_F \+ t_B\)|GPipe keeps all m",
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
        r"a tie going to the lower index",
    ),
    Attack(
        "lab10.2",
        "lookup-held-capacities",
        "test_expert_capacity_values' table and the held example's kept choices",
        {
            "minitorch_dist.models.capacity:expert_capacity": _capacity_lookup,
            "minitorch_dist.models.routing:apply_capacity": _apply_capacity_lookup,
        },
        r"not the least C|first min\(count, C\)",
    ),
    Attack(
        "lab01.3",
        "stand-in-states-found-on-enter",
        "the closed-form states the tests compare with: only what enter finds",
        {
            "minitorch_dist.memory.track:MemoryTracker.__torch_dispatch__": _track_nothing,
        },
        r"were not filed|storages made while autograd records|must file the storages",
    ),
    Attack(
        "lab02.1",
        "stand-in-torch-casts",
        "torch_cast_bits and torch_bits_to_values, the tests' own answers (tf32: fp32 cut)",
        {
            "minitorch_dist.precision.formats:encode": _encode_by_torch,
            "minitorch_dist.precision.formats:decode": _decode_by_torch,
        },
        r"no torch dtype|do not cut them off",
    ),
    Attack(
        "lab02.2",
        "stand-in-grad-scaler-rule",
        "torch.amp.GradScaler's documented rule, the tests' reference",
        {
            "minitorch_dist.precision.loss_scaling:DynamicLossScaler.update": _update_like_grad_scaler,
        },
        r"stays finite",
    ),
    Attack(
        "lab02.3",
        "stand-in-plain-adam",
        "the plain fp32 Adam the tests compare with",
        {
            "minitorch_dist.precision.mixed:MixedPrecisionOptimizer.step": _mixed_step_plain_adam,
        },
        r"divided by the scale|report the inf|fp32 gradients live only during the step",
    ),
    Attack(
        "lab02.4",
        "stand-in-torch-cast",
        "torch's own fp8 cast, scale 1",
        {
            "minitorch_dist.precision.fp8:quantize_per_tensor": _quantize_unscaled,
            "minitorch_dist.precision.fp8:quantize_blockwise": _quantize_blockwise_unscaled,
        },
        r"not amax / format max|is not the amax of its own|the block scaling is per tensor",
    ),
    Attack(
        "lab03.1",
        "stand-in-plain-call",
        "the un-checkpointed call the tests compare with",
        {
            "minitorch_dist.recompute.checkpoint:checkpoint": _checkpoint_plain_call,
        },
        r"recorded the inside of the function|must run once, under torch.no_grad",
    ),
    Attack(
        "lab03.2",
        "stand-in-names-only",
        "the block names the tests expect, nothing wrapped",
        {
            "minitorch_dist.recompute.policies:apply_activation_checkpointing": _apply_names_only,
        },
        r"runs it under checkpoint|nothing recomputes|not checkpointed",
    ),
    Attack(
        "lab03.3",
        "stand-in-names-ending-attn",
        "the module names the tests print",
        {
            "minitorch_dist.recompute.policies:selective_policy": _selective_by_name,
        },
        r"must pick only the attention core",
    ),
    Attack(
        "lab04.1",
        "stand-in-naive-accumulation",
        "naive_accumulation_step, shipped for comparison",
        {
            "minitorch_dist.accumulate.accumulate:accumulation_step": _naive_accumulation,
        },
        r"mean of the micro-batches' mean losses|not the big batch's|inside no_sync at each backward",
    ),
    Attack(
        "lab05.1",
        "stand-in-dist-all-reduce",
        "torch's all-reduce, the tests' expected sums",
        {
            "minitorch_dist.comm.ring:ring_reduce_scatter": _all_reduce_in_place,
            "minitorch_dist.comm.ring:ring_all_reduce": _all_reduce_in_place,
        },
        r"the reduce-scatter sent 0 bytes",
    ),
    Attack(
        "lab05.2",
        "stand-in-one-flat-all-reduce",
        "the averaged gradient the single-process test sees, in one message",
        {
            "minitorch_dist.data_parallel.naive:DataParallelNaive.finish_gradient_synchronization": _naive_one_flat_all_reduce,
        },
        r"on its own|inside no_sync\(\) the backward must not communicate",
    ),
    Attack(
        "lab05.3",
        "stand-in-naive-after-backward",
        "lab05.2's loop after the backward",
        {
            "minitorch_dist.data_parallel.bucketed:DataParallelBucket._grad_ready": _nothing,
            "minitorch_dist.data_parallel.bucketed:DataParallelBucket._launch": _nothing,
            "minitorch_dist.data_parallel.bucketed:DataParallelBucket.finish_gradient_synchronization": _bucketed_as_naive,
        },
        r"one all-reduce per bucket|no gradient for|inside no_sync\(\) the hooks",
    ),
    Attack(
        "lab06.1",
        "stand-in-ddp-all-reduce",
        "DDP's all-reduce of lab 5, then a shard",
        {
            "minitorch_dist.zero.stage1:ZeroStage1._reduce_gradients": _stage1_all_reduce,
        },
        r"an all-reduce sends twice",
    ),
    Attack(
        "lab06.2",
        "stand-in-whole-gradient-all-reduce",
        "the whole averaged gradient, then this rank's piece",
        {
            "minitorch_dist.zero.stage2:UnitwiseGradients._reduce_unit": _stage2_all_reduce,
        },
        r"an all-reduce sends twice",
    ),
    Attack(
        "lab06.3",
        "stand-in-never-freed",
        "the replicated model the tests compare with: nothing freed",
        {
            "minitorch_dist.zero.stage3:ZeroStage3._free": _nothing,
        },
        r"before forward and again before backward|a gather skipped|never freed",
    ),
    Attack(
        "lab06.4",
        "stand-in-device-adam",
        "torch.optim.Adam where the shards are, the tests' reference",
        {
            "minitorch_dist.zero.offload:CpuOffloadAdam.__init__": _offload_init_on_device,
            "minitorch_dist.zero.offload:CpuOffloadAdam.step": _offload_step_on_device,
        },
        r"optimizer bytes: with offload|more than one fp32 master, m and v",
    ),
    Attack(
        "lab07.1",
        "stand-in-identities",
        "the single-process layer: f and g pass their input on",
        {
            "minitorch_dist.tensor_parallel.functions:CopyToTP.backward": _identity_backward,
            "minitorch_dist.tensor_parallel.functions:ReduceFromTP.forward": _identity_forward,
        },
        r"f's backward must all-reduce|g's forward must all-reduce",
    ),
    Attack(
        "lab07.2",
        "stand-in-local-linear",
        "nn.Linear's formula on the local shard, as the test's reference layer",
        {
            "minitorch_dist.tensor_parallel.layers:RowParallelLinear.forward": _row_forward_local,
        },
        r"rank \d+, output",
    ),
    Attack(
        "lab07.3",
        "stand-in-block-unchanged",
        "the single-process block the tests compare with",
        {
            "minitorch_dist.tensor_parallel.model:parallelize_block": _block_unchanged,
        },
        r"4 all-reduces|the block is not split",
    ),
    Attack(
        "lab07.4",
        "stand-in-head-unsplit",
        "the single-process head the tests compare with",
        {
            "minitorch_dist.tensor_parallel.vocab:vocab_parallel_head": _head_unsplit,
        },
        r"padded with zero rows to 256",
    ),
    Attack(
        "lab07.5",
        "stand-in-no-norm-marked",
        "the tensor-parallel model without sequence parallelism",
        {
            "minitorch_dist.tensor_parallel.sequence:sequence_parallel_norms": _no_sp_norms,
        },
        r"only the norm weights' gradients are wrong|4 all-gathers and 4 reduce-scatters|keep only the rank's s/t tokens|weight norm",
    ),
    Attack(
        "lab08.1",
        "stand-in-first-part",
        "one part's output and lse, as the held parts print them",
        {
            "minitorch_dist.context_parallel.blocks:merge_partials": _merge_keep_first,
        },
        r"merged (output|lse)|must take part B's output",
    ),
    Attack(
        "lab08.2",
        "stand-in-own-block",
        "block_attention on this rank's own block, the tests' local formula",
        {
            "minitorch_dist.context_parallel.ring:ring_attention_forward": _ring_forward_local,
        },
        r"rank \d+ out",
    ),
    Attack(
        "lab09.1",
        "stand-in-no-exchange",
        "the single process's stage: nothing sent or received",
        {
            "minitorch_dist.pipeline.stage:PipelineStage.exchange": _nothing,
        },
        r"DID NOT RAISE|gradient of embed.weight",
    ),
    Attack(
        "lab10.3",
        "stand-in-counts-kept",
        "this rank's own counts, as the test's uniform routing sends",
        {
            "minitorch_dist.expert_parallel.dispatch:exchange_counts": _counts_kept,
        },
        r"counts were not exchanged",
    ),
    Attack(
        "lab11.1",
        "stand-in-local-norm",
        "clip_grad_norm_'s formula on this rank's piece",
        {
            "minitorch_dist.parallel3d.clip:grid_grad_norm": _grid_norm_local,
        },
        r"rank \d+, (weight|losses|gradient norm)",
    ),
    Attack(
        "lab12.1",
        "stand-in-whole-model-states",
        "lab 1's model_state_bytes of the whole model, unsharded",
        {
            "minitorch_dist.planner.fit:rank_memory": _rank_memory_whole_model,
        },
        r"1F1B's first stage holds p|states shard over|interleaving's warm-up|micro-batches are in flight",
    ),
    Attack(
        "lab12.2",
        "stand-in-as-listed",
        "the rows in the order the tests list them",
        {
            "minitorch_dist.planner.search:rank": _rank_as_listed,
        },
        r"by predicted step time",
    ),
    Attack(
        "lab08.3",
        "stand-in-own-block-backward",
        "block_attention_backward on this rank's own block, the tests' local formula",
        {"minitorch_dist.context_parallel.ring:ring_attention_backward": _ring_backward_local},
        r"rank \d+ d[qkv]",
    ),
    Attack(
        "lab10.4",
        "stand-in-every-token-dropped",
        "the output the capacity tests give a dropped token",
        {
            "minitorch_dist.expert_parallel.layer:ExpertParallelMoE._dropless": _dropless_pass_through
        },
        r"sent \[\] rows to the ranks|the split sizes must count rows per destination rank",
    ),
    Attack(
        "lab04.2",
        "stand-in-one-pass",
        "the big batch the tests compare with, in one pass (the measurement at grad_acc = 1)",
        {"minitorch_dist.accumulate.measure:measure_accumulation": _one_pass_of_the_global_batch()},
        r"activations are kept alive|must grow with the micro-batch|not below the same split",
    ),
]
