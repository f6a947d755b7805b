"""The planner's options (chapter 12): overlap, the critical-batch warning, HSDP.

Each is off by default and then changes no number; on, each equals its closed form.
"""

from __future__ import annotations

import math

import pytest

from minitorch_dist.memory import model_state_bytes
from minitorch_dist.pipeline import bubble_fraction
from minitorch_dist.planner import (
    Cluster,
    Overlap,
    ParallelConfig,
    as_model,
    choose,
    comm_bytes,
    micro_batches,
    peak_memory,
    plan,
    step_time,
)
from minitorch_dist.planner.hsdp import hsdp_comm_bytes, replica_all_reduce_bytes
from minitorch_dist.zero.measure import zero_comm_bytes

L8 = as_model("llama-3-8b")
CLUSTER = Cluster.from_preset("dgx-h100", 64)
KW = {"global_batch": 128, "seq_len": 4096}
CONFIGS = [
    ParallelConfig(dp=8, tp=8, zero=1),
    ParallelConfig(dp=4, tp=4, pp=4, sp=True, zero=2, recompute="full"),
    ParallelConfig(dp=16, tp=2, pp=2, v=2, sp=True, zero=3, recompute="none"),
    ParallelConfig(dp=4, tp=2, pp=8, sp=True, zero=0),
    ParallelConfig(dp=64, zero=3, shard_group=8),
]


# the data-parallel exchange and the pipeline sends hidden, TP, CP and EP exposed (their own
# windows: tests/test_planner_overlap.py)
DP_PP = Overlap(tp="none", cp=False, ep=False)


def _replica_seconds(config: ParallelConfig) -> float:
    """HSDP's replica all-reduce on its link (0 without HSDP)."""
    c = config
    if c.replicas == 1:
        return 0.0
    sent = comm_bytes(L8, c, **KW)["dp_replica"]
    link = CLUSTER.link(c.replicas, c.tp * c.shard)
    return sent / link.bandwidth + 2 * (c.replicas - 1) * link.alpha


def _overlap_closed_form(config: ParallelConfig, off) -> float:  # noqa: ANN001
    """T = (t_c + t_tp + t_cp + t_ep + max(0, t_pp - t_c)) (1 + f)
    + max(0, t_grad - W_bwd) + max(0, t_param - W_fwd) + max(0, t_rep - W_rep) + t_off."""
    c, seq = config, KW["seq_len"]
    m = micro_batches(c, KW["global_batch"])
    tokens = KW["global_batch"] * seq
    hardware = L8.flops_per_token(seq, c.recompute) * tokens
    if c.recompute == "selective":
        hardware += 4 * L8.llama.layers * seq * L8.llama.hidden * tokens
    beta = 1 - L8.flops_per_token(seq, "none") * tokens / 3 / hardware
    # gradients under backward: the last micro-batch's (ZeRO-0/1) or every one's (ZeRO-2/3)
    w_bwd = {0: beta / m, 1: beta / m, 2: beta, 3: beta}[c.zero] * off.compute
    # parameters under the next step's first forward (ZeRO-1/2) or every forward (ZeRO-3)
    w_fwd = {0: 0.0, 1: (1 - beta) / m, 2: (1 - beta) / m, 3: 1 - beta}[c.zero] * off.compute
    layers = L8.llama.layers // c.pp
    if c.zero == 3:  # the step's first forward gather is exposed
        w_fwd = min(w_fwd, off.dp_param * (1 - 1 / (m * layers)))
    elif c.zero:  # ZeRO-1/2: the next step's first layer waits for its gather
        w_fwd = min(w_fwd, off.dp_param * (1 - 1 / layers))
    f = bubble_fraction(c.pp, m, c.v)
    exposed = off.compute + off.tp + off.cp + off.ep + max(0.0, off.pp - off.compute)
    replica = _replica_seconds(c)
    grad = off.dp - off.dp_param - replica
    w_rep = beta / m * off.compute  # deferred: under the last backward
    dp = max(0.0, grad - w_bwd) + max(0.0, off.dp_param - w_fwd) + max(0.0, replica - w_rep)
    return exposed * (1 + f) + dp + off.offload


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.label())
def test_overlap_off_is_the_default_and_on_equals_its_closed_form(config: ParallelConfig) -> None:
    """Catches an overlap switch that changes the default numbers, hides more than the compute
    can cover, or does not follow the documented closed form."""
    default = step_time(L8, CLUSTER, config, **KW)
    off = step_time(L8, CLUSTER, config, **KW, overlap=False)
    assert off == default and off.hidden == 0.0
    m = micro_batches(config, KW["global_batch"])
    parts = off.compute + off.tp + off.cp + off.ep + off.pp
    assert off.bubble == parts * bubble_fraction(config.pp, m, config.v)
    assert off.total == parts + off.bubble + off.dp + off.offload  # nothing overlaps
    on = step_time(L8, CLUSTER, config, **KW, overlap=DP_PP)
    assert on.total <= off.total
    assert math.isclose(on.total, _overlap_closed_form(config, off), rel_tol=1e-12)
    assert math.isclose(off.total - on.total, on.hidden, rel_tol=1e-9, abs_tol=1e-15)
    assert on.compute == off.compute and on.tp == off.tp  # only pp and dp hide
    every = step_time(L8, CLUSTER, config, **KW, overlap=True)  # and TP, CP in their windows
    assert every.total <= on.total and every.dp == on.dp and every.pp == on.pp
    assert math.isclose(off.total - every.total, every.hidden, rel_tol=1e-9, abs_tol=1e-15)


def test_overlap_hides_dp_when_the_backward_is_long_enough() -> None:
    """Catches an overlap that hides nothing (or everything) of ZeRO-3's exchange: its backward
    gathers and reduce-scatters (2/3 of the bytes) hide under backward, its forward gathers
    under forward, all but the step's first one (one layer's of the m L forward gathers)."""
    c = ParallelConfig(dp=64, zero=3)
    off = step_time(L8, CLUSTER, c, **KW)
    on = step_time(L8, CLUSTER, c, **KW, overlap=True)
    m, layers = micro_batches(c, KW["global_batch"]), L8.llama.layers
    assert math.isclose(off.dp_param, off.dp / 3, rel_tol=1e-12)
    assert off.dp > 0 and math.isclose(on.dp, off.dp_param / (m * layers), rel_tol=1e-9)


def test_zero1_parameter_gather_hides_under_the_next_forward_not_the_last_backward() -> None:
    """Catches a window that hides ZeRO-1's parameter all-gather under the last micro-batch's
    backward: it can start only after the optimizer step, so it hides under the next step's
    first forward (all but its first layer's gather); the gradient reduce-scatter (the other
    half) under the last backward."""
    c = ParallelConfig(dp=64, zero=1)
    off = step_time(L8, CLUSTER, c, **KW)
    on = step_time(L8, CLUSTER, c, **KW, overlap=True)
    m = micro_batches(c, KW["global_batch"])
    assert m == 2 and math.isclose(off.dp_param, off.dp / 2, rel_tol=1e-12)
    assert on.dp_param < off.dp_param  # some of the gather hides, under a forward
    first_forward = (off.compute - _backward(c, off)) / m
    window = min(first_forward, off.dp_param * (1 - 1 / L8.llama.layers))
    assert math.isclose(on.dp_param, off.dp_param - window, rel_tol=1e-12)


def _backward(config: ParallelConfig, off) -> float:  # noqa: ANN001
    """beta t_c: the step's compute after its forward passes."""
    seq, tokens = KW["seq_len"], KW["global_batch"] * KW["seq_len"]
    hardware = L8.flops_per_token(seq, config.recompute) * tokens
    hardware += 4 * L8.llama.layers * seq * L8.llama.hidden * tokens  # selective
    return (1 - L8.flops_per_token(seq, "none") * tokens / 3 / hardware) * off.compute


def test_plan_overlap_off_equals_todays_rows() -> None:
    only = {"tp": 8, "pp": 2}
    today = plan(L8, CLUSTER, **KW, only=only)
    off = plan(L8, CLUSTER, **KW, only=only, overlap=False)
    assert [(r.config, r.time, r.memory, r.reason) for r in off.rows] == [
        (r.config, r.time, r.memory, r.reason) for r in today.rows
    ]
    on = plan(L8, CLUSTER, **KW, only=only, overlap=True)
    assert on.fitting[0].time.total <= today.fitting[0].time.total
    with pytest.raises(ValueError, match="overlap"):
        plan(L8, CLUSTER, **KW, only=only, overlap="yes")


def test_critical_batch_flags_the_rows_past_it() -> None:
    """Catches a warning that is missing past the critical batch, present below it, or that
    does not name d*m*b."""
    only = {"tp": 8, "pp": 1, "micro_batch": 2}
    quiet = plan(L8, CLUSTER, **KW, only=only)
    assert all(r.warning == "" for r in quiet.rows)
    below = plan(L8, CLUSTER, **KW, only=only, critical_batch=128)
    assert all(r.warning == "" for r in below.rows)
    past = plan(L8, CLUSTER, **KW, only=only, critical_batch=100)
    assert past.fitting and all(r.warning for r in past.fitting)
    assert all(not r.warning for r in past.rejected)
    assert "d*m*b = 8*8*2 = 128 sequences > critical_batch=100" in past.fitting[0].warning
    assert [r.config for r in past.rows] == [r.config for r in quiet.rows]  # ranking unchanged
    with pytest.raises(ValueError, match="critical_batch"):
        plan(L8, CLUSTER, **KW, only=only, critical_batch=0)


def test_choose_carries_the_warning() -> None:
    small = Cluster.from_preset("dgx-h100", 8)
    kw = {"global_batch": 16, "seq_len": 1024}
    assert choose("llama-3-8b", small, **kw).warning == ""
    assert "critical_batch=8" in choose("llama-3-8b", small, **kw, critical_batch=8).warning


def test_hsdp_with_the_whole_dp_as_shard_group_is_plain_zero() -> None:
    """Catches an HSDP option that changes plain ZeRO's numbers."""
    for zero in (1, 2, 3):
        plain = ParallelConfig(dp=16, tp=4, zero=zero)
        whole = ParallelConfig(dp=16, tp=4, zero=zero, shard_group=16)
        assert comm_bytes(L8, plain, **KW) == comm_bytes(L8, whole, **KW)
        assert step_time(L8, CLUSTER, plain, **KW) == step_time(L8, CLUSTER, whole, **KW)
        assert peak_memory(L8, plain, **KW) == peak_memory(L8, whole, **KW)


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_hsdp_memory_and_bytes_equal_the_closed_form(zero: int) -> None:
    """Catches HSDP states sharded over all of dp (not the shard group), a missing replica
    all-reduce, or one over the wrong count."""
    g, d = 8, 64
    c = ParallelConfig(dp=d, zero=zero, shard_group=g)
    psi = L8.llama.num_params_per_rank(tp=1, pp=1)
    m = micro_batches(c, KW["global_batch"])
    mem = peak_memory(L8, c, **KW)
    shard = -(-psi // g)
    expected = {
        1: (2 * psi, 2 * psi, 12 * shard),
        2: (2 * psi, 2 * shard, 12 * shard),
        3: (2 * shard, 2 * shard, 12 * shard),
    }[zero]
    assert (mem["params"], mem["grads"], mem["optimizer"]) == expected
    assert (
        mem["params"] + mem["grads"] + mem["optimizer"]
        == model_state_bytes(psi, zero_stage=zero, dp=g)["total"]
    )
    r = d // g
    within = {1: 2, 2: m + 1, 3: 3 * m}[zero] * (g - 1) / g * 2 * psi
    across = 2 * (r - 1) / r * 2 * shard
    got = comm_bytes(L8, c, **KW)
    assert math.isclose(got["dp"], within, rel_tol=1e-12)
    assert got["dp"] == zero_comm_bytes(psi, zero, g, grad_acc=m)
    assert math.isclose(got["dp_replica"], across, rel_tol=1e-12)
    assert got["dp"] + got["dp_replica"] == hsdp_comm_bytes(psi, zero, d, g, grad_acc=m)
    assert replica_all_reduce_bytes(psi, g, g) == 0
    # the all-reduce after every micro-batch's reduce-scatter, not deferred: m times the across
    eager = hsdp_comm_bytes(psi, zero, d, g, grad_acc=m, defer=False)
    assert math.isclose(eager - got["dp"], m * across, rel_tol=1e-12) and m > 1


def test_hsdp_is_refused_where_it_is_not_modelled() -> None:
    with pytest.raises(ValueError, match="shard_group"):
        ParallelConfig(shard_group=-1)
    with pytest.raises(ValueError, match="does not divide"):
        replica_all_reduce_bytes(10, 8, 3)
    from minitorch_dist.planner import validate

    for bad in (
        ParallelConfig(dp=64, zero=3, shard_group=6),
        ParallelConfig(dp=64, zero=0, shard_group=8),
    ):
        with pytest.raises(ValueError, match="shard_group"):
            validate(L8, CLUSTER, bad, **KW)
    with pytest.raises(ValueError, match="HSDP"):
        peak_memory(L8, ParallelConfig(dp=64, zero=3, shard_group=8), **KW, activations="exact")


def test_plan_tries_shard_groups_only_when_asked() -> None:
    only = {"tp": 8, "pp": 1, "micro_batch": 1, "recompute": "selective", "offload": False}
    today = plan(L8, CLUSTER, **KW, only=only)
    assert all(r.config.shard_group == 0 for r in today.rows)
    both = plan(L8, CLUSTER, **KW, only=only, shard_groups=(2, 3, 8))
    hsdp = [r for r in both.rows if r.config.shard_group]
    assert {r.config.shard_group for r in hsdp} == {2}  # 3 does not divide dp=8, 8 is all of it
    assert {r.config.zero for r in hsdp} == {1, 2, 3}
