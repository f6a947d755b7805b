"""The planner's overlap per axis (chapter 12), its ZeRO-3 resharding policies and HSDP's two
syncs, and a mutant of ZeRO sharded over dp alone.

Each axis hides in the window its chapter teaches, under that chapter's condition, and the
planner's seconds equal the chapter's own functions: TP against chapter 7's
``tp_backward_timeline`` and ``collective_matmul``, CP against chapter 8's ``ring_step_times``
and ``min_tokens_per_rank``, EP only under a schedule pairing two micro-batches.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from minitorch_dist.context_parallel.cost import min_tokens_per_rank, ring_step_times
from minitorch_dist.planner import (
    RESHARD,
    Cluster,
    Overlap,
    ParallelConfig,
    as_model,
    comm_bytes,
    micro_batches,
    plan,
    rank_memory,
    step_time,
    validate,
)
from minitorch_dist.tensor_parallel.overlap import collective_matmul, tp_backward_timeline

L8, L70 = as_model("llama-3-8b"), as_model("llama-3-70b")
CLUSTER = Cluster.from_preset("dgx-h100", 64)
KW = {"global_batch": 128, "seq_len": 4096}
RATE = CLUSTER.peak_flops * CLUSTER.matmul_efficiency
ONLY = {"dp": False, "pp": False, "tp": "none", "cp": False, "ep": False}  # nothing hides


def _tp_case(sp: bool) -> tuple[ParallelConfig, int, int, dict]:
    c = ParallelConfig(dp=8, tp=8, sp=sp, zero=1, recompute="none")
    link = CLUSTER.link(8, 1)
    kw = {"micro_batch": 1, "seq_len": KW["seq_len"], "tp": 8, "bandwidth": link.bandwidth}
    return c, micro_batches(c, KW["global_batch"]), L70.llama.layers, {**kw, "alpha": link.alpha}


def test_tp_backward_all_reduce_hides_under_dw_as_chapter_7_simulates() -> None:
    """Catches TP kept exposed under overlap (or hidden whole): each region's dX all-reduce runs
    beside its dW product, exposed by what outlasts it (chapter 7's timeline); the forward's
    two all-reduces stay exposed."""
    c, m, layers, kw = _tp_case(sp=False)
    off = step_time(L70, CLUSTER, c, **KW)
    on = step_time(L70, CLUSTER, c, **KW, overlap=Overlap(**{**ONLY, "tp": "backward"}))
    serial = tp_backward_timeline(L70.llama, **kw, flops=RATE, overlap=False)
    hidden = tp_backward_timeline(L70.llama, **kw, flops=RATE, overlap=True)
    ar = serial["comm"] / 2
    assert math.isclose(off.tp, m * layers * 4 * ar, rel_tol=1e-12)
    assert math.isclose(on.tp, m * layers * (2 * ar + hidden["exposed"]), rel_tol=1e-12)
    assert 0 < on.tp < off.tp and on.compute == off.compute
    assert "dX all-reduce under the dW product" in dict((t.name, t.why) for t in on.terms)["tp"]


def test_async_tp_decomposes_the_forward_only_with_sp() -> None:
    """Catches async TP without sequence parallelism (PyTorch's decomposes sp's all-gathers and
    reduce-scatters), or a forward that is not chapter 7's collective matmul: a product ``t g``
    beside ``t - 1`` shard transfers ``c`` takes ``g + (t - 1) max(g, c)``."""
    c, m, layers, kw = _tp_case(sp=True)
    h, f, t = L70.llama.hidden, L70.llama.ffn_hidden, 8
    kv = L70.llama.kv_heads // t * L70.llama.head_dim
    gemm = lambda k, n: 2 * KW["seq_len"] * k * n / RATE  # noqa: E731
    products = (gemm(h, h // t + 2 * kv), gemm(h // t, h), gemm(h, 2 * f // t), gemm(f // t, h))
    ar = tp_backward_timeline(L70.llama, **kw, flops=RATE, overlap=False)["comm"] / 2
    half = (ar - 2 * (t - 1) * kw["alpha"]) / 2 + (t - 1) * kw["alpha"]
    forward = sum(
        collective_matmul(gather_seconds=half, gemm_seconds=g, tp=t)["exposed"] for g in products
    )
    backward = tp_backward_timeline(L70.llama, **kw, flops=RATE, overlap=True)["exposed"]
    on = step_time(L70, CLUSTER, c, **KW, overlap=Overlap(**{**ONLY, "tp": "async"}))
    assert math.isclose(on.tp, m * layers * (forward + backward), rel_tol=1e-9)
    no_sp = replace_sp(c)
    plain = step_time(L70, CLUSTER, no_sp, **KW, overlap=Overlap(**{**ONLY, "tp": "async"}))
    megatron = step_time(L70, CLUSTER, no_sp, **KW, overlap=Overlap(**{**ONLY, "tp": "backward"}))
    assert plain.tp == megatron.tp > on.tp  # without sp async TP has nothing to decompose
    assert "needs sp" in dict((t.name, t.why) for t in plain.terms)["tp"]


def replace_sp(config: ParallelConfig) -> ParallelConfig:
    from dataclasses import replace

    return replace(config, sp=False)


@pytest.mark.parametrize(("seq_len", "hides"), [(4096, False), (131072, True)])
def test_cp_ring_hides_behind_block_attention_past_chapter_8s_length(
    seq_len: int, hides: bool
) -> None:
    """Catches a ring kept exposed under overlap, or hidden whatever s/cp: a ring step hides
    when its block attention (chapter 8's ring_step_times) outlasts its K/V transfer, which
    without latency is from s/cp >= n_kv p F / (n_h B) tokens per rank; otherwise
    1 - compute / transfer of it stays exposed."""
    c = ParallelConfig(dp=1, tp=8, cp=8, zero=1, recompute="selective")  # the ring across nodes
    kw = {"global_batch": 8, "seq_len": seq_len}
    m, layers = micro_batches(c, 8), L8.llama.layers
    off = step_time(L8, CLUSTER, c, **kw)
    on = step_time(L8, CLUSTER, c, **kw, overlap=Overlap(**{**ONLY, "cp": True}))
    link = CLUSTER.link(8, 8)
    heads, kv = L8.llama.heads // 8, L8.llama.kv_heads // 8
    step = ring_step_times(batch=1, heads=heads, kv_heads=kv, seq=seq_len, head_dim=128, cp=8,
                           alpha=0.0, bandwidth=link.bandwidth, flops=RATE)  # fmt: skip
    transfer = off.cp / (m * layers * 3 * 7)  # forward, backward twice the bytes
    need = min_tokens_per_rank(heads=heads, kv_heads=kv, bandwidth=link.bandwidth, flops=RATE)
    assert (seq_len // 8 >= need) == hides
    assert math.isclose(on.cp, off.cp * max(0.0, 1 - step["compute"] / transfer), rel_tol=1e-12)
    assert (on.cp == 0) == hides and on.cp < off.cp
    assert f"{need:,.0f} needed" in dict((t.name, t.why) for t in on.terms)["cp"]


def test_ep_all_to_alls_hide_only_under_a_schedule_pairing_two_micro_batches() -> None:
    """Catches all-to-alls hidden under 1F1B (which runs one chunk at a time), or not hidden under
    a DualPipe-style schedule: the forward's under the other micro-batch's backward, the
    backward's under its forward; with one micro-batch there is nothing to pair."""
    mixtral = as_model("mixtral-8x7b")
    c = ParallelConfig(dp=64, ep=8, zero=1, recompute="selective")
    kw = {"global_batch": 128, "seq_len": 4096}
    off = step_time(mixtral, CLUSTER, c, **kw)
    assert step_time(mixtral, CLUSTER, c, **kw, overlap=True).ep == off.ep > 0
    on = step_time(mixtral, CLUSTER, c, **kw, overlap=Overlap(**{**ONLY, "ep": True}))
    tokens = kw["global_batch"] * kw["seq_len"]
    hardware = mixtral.flops_per_token(4096, "none") * tokens
    hardware += 4 * 32 * 4096 * 4096 * tokens  # selective: the attention core again
    beta = 1 - mixtral.flops_per_token(4096, "none") * tokens / 3 / hardware
    fwd = off.ep / 2  # two of the four all-to-alls
    want = max(0.0, fwd - beta * off.compute) + max(0.0, fwd - (1 - beta) * off.compute)
    assert math.isclose(on.ep, want, abs_tol=1e-15) and on.ep < off.ep
    one = step_time(mixtral, CLUSTER, c, global_batch=64, seq_len=4096, overlap=Overlap(ep=True))
    assert one.ep == step_time(mixtral, CLUSTER, c, global_batch=64, seq_len=4096).ep
    assert "one micro-batch" in dict((t.name, t.why) for t in one.terms)["ep"]


def test_every_term_says_whether_it_is_exposed_and_why() -> None:
    """Catches a term missing from the explanation, seconds in it that differ from the step's
    parts, or a hidden share that does not add back to the no-overlap seconds."""
    c = ParallelConfig(dp=2, tp=4, pp=4, cp=2, sp=True, zero=3, recompute="selective")
    off = step_time(L8, CLUSTER, c, **KW)
    for overlap in (False, True, Overlap.full()):
        t = step_time(L8, CLUSTER, c, **KW, overlap=overlap)
        names = [term.name for term in t.terms]
        assert names == ["compute", "tp", "cp", "ep", "pp", "bubble", "dp", "offload"]
        for term in t.terms:
            assert term.seconds == getattr(t, term.name) and term.why
            if term.name in ("tp", "cp", "pp", "dp"):
                assert math.isclose(term.seconds + term.hidden, getattr(off, term.name))
        lines = t.explain().splitlines()
        assert all(len(line) <= 88 for line in lines)
        assert [line.split()[0] for line in lines if not line.startswith(" ")] == names
        if overlap is False:
            assert all(not x.hidden for x in t.terms)
            assert all(x.why.startswith(("exposed", "no ")) for x in t.terms[1:5])
    with pytest.raises(ValueError, match="overlap"):
        step_time(L8, CLUSTER, c, **KW, overlap="yes")
    with pytest.raises(ValueError, match="tp"):
        Overlap(tp="sometimes")


# -- ZeRO-3's resharding policies and HSDP's two syncs ------------------------------------------
UNITS = {"after_forward": lambda m: 3 * m, "after_backward": lambda m: 2 * m,
         "after_step": lambda m: m + 1, "after_step_no_sync": lambda m: 2}  # fmt: skip


@pytest.mark.parametrize("policy", list(RESHARD))
def test_zero3_resharding_policy_sets_bytes_and_what_it_holds(policy: str) -> None:
    """Catches one policy presented as the only one: freeing after forward and backward sends
    3m units of (n - 1)/n of the 16-bit weights, keeping them to backward 2m, across
    micro-batches m + 1, with one reduce-scatter per step 2; keeping costs the stage's
    unsharded parameters (and, reducing once, its unsharded gradients)."""
    c = ParallelConfig(dp=16, tp=4, zero=3, reshard=policy)
    m, psi = micro_batches(c, KW["global_batch"]), L8.llama.num_params_per_rank(tp=4)
    sent = comm_bytes(L8, c, **KW)["dp"]
    assert math.isclose(sent, UNITS[policy](m) * 15 / 16 * 2 * psi, rel_tol=1e-12) and m > 2
    mem = rank_memory(L8, c, **KW)
    shard = 2 * -(-psi // 16)
    held = 0 if policy == "after_forward" else 2 * psi
    assert mem["params"] == shard + held
    assert mem["grads"] == (2 * psi if policy == "after_step_no_sync" else shard)
    assert policy in RESHARD and (policy == "after_forward") == (c.label().find("reshard") < 0)


def test_reshard_once_per_step_costs_what_zero1_costs_and_plan_tries_the_policies() -> None:
    """Catches ZeRO-3 with one gather and one reduce-scatter per step priced unlike ZeRO-1 (the
    same bytes), a policy accepted without ZeRO-3, and a search that ignores ``reshard=``."""
    kept = ParallelConfig(dp=64, zero=3, reshard="after_step_no_sync")
    assert (
        step_time(L8, CLUSTER, kept, **KW).dp
        == step_time(L8, CLUSTER, ParallelConfig(dp=64, zero=1), **KW).dp
    )
    with pytest.raises(ValueError, match="needs zero=3"):
        validate(L8, CLUSTER, ParallelConfig(dp=64, zero=2, reshard="after_step"), **KW)
    with pytest.raises(ValueError, match="reshard"):
        ParallelConfig(reshard="never")
    with pytest.raises(ValueError, match="exact count"):
        rank_memory(L8, kept, **KW, activations="exact")
    only = {"tp": 8, "pp": 1, "micro_batch": 1, "recompute": "selective", "offload": False}
    default = plan(L8, CLUSTER, **KW, only=only)
    assert {r.config.reshard for r in default.rows} == {"after_forward"}
    every = plan(L8, CLUSTER, **KW, only=only, reshard=tuple(RESHARD))
    assert {r.config.reshard for r in every.rows if r.config.zero == 3} == set(RESHARD)
    assert {r.config.reshard for r in every.rows if r.config.zero < 3} == {"after_forward"}


def test_hsdp_replica_all_reduce_deferred_or_per_micro_batch() -> None:
    """Catches HSDP's one all-reduce per step assumed where the run all-reduces after every
    micro-batch's reduce-scatter (m times the bytes), and a per-micro-batch sync accepted
    where there is one reduce-scatter per step or no replica."""
    deferred = ParallelConfig(dp=64, zero=3, shard_group=8)
    eager = ParallelConfig(dp=64, zero=3, shard_group=8, hsdp_sync="micro_batch")
    m = micro_batches(deferred, KW["global_batch"])
    a, b = comm_bytes(L8, deferred, **KW), comm_bytes(L8, eager, **KW)
    assert a["dp"] == b["dp"] and math.isclose(b["dp_replica"], m * a["dp_replica"]) and m > 1
    assert step_time(L8, CLUSTER, eager, **KW).dp > step_time(L8, CLUSTER, deferred, **KW).dp
    for bad in (
        ParallelConfig(dp=64, zero=3, hsdp_sync="micro_batch"),
        ParallelConfig(dp=64, zero=1, shard_group=8, hsdp_sync="micro_batch"),
    ):
        with pytest.raises(ValueError, match="hsdp_sync"):
            validate(L8, CLUSTER, bad, **KW)
    only = {"tp": 8, "pp": 1, "micro_batch": 1, "recompute": "selective", "offload": False}
    both = plan(L8, CLUSTER, **KW, only=only, shard_groups=(2,), hsdp_sync=("step", "micro_batch"))
    syncs = {(r.config.zero, r.config.hsdp_sync) for r in both.rows if r.config.shard_group}
    assert syncs == {(1, "step"), (2, "step"), (2, "micro_batch"), (3, "step"), (3, "micro_batch")}


# -- ZeRO over dp x cp: the old behaviour as a mutant --------------------------------------------
def test_cp_halves_the_sharded_states_against_the_same_dp() -> None:
    """Catches ZeRO sharded over dp alone: at the same dp x cp the states are the same whatever
    the split, so cp = 2 holds half of what dp alone would shard them to."""
    for zero, part in ((1, "optimizer"), (2, "grads"), (3, "params")):
        wide = rank_memory(L8, ParallelConfig(dp=8, zero=zero), **KW)[part]
        split = rank_memory(L8, ParallelConfig(dp=4, cp=2, zero=zero), **KW)[part]
        alone = rank_memory(L8, ParallelConfig(dp=4, zero=zero), **KW)[part]
        assert split == wide and 2 * split == alone


def _load(name: str):  # noqa: ANN202
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_mutant_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_zero_over_dp_only_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The old planner (ZeRO sharded and reduced over dp, experts over dp / ep, whatever cp)
    restored as a mutant: the planner's tests of dp x cp fail on it, and pass on the package."""
    checks = [
        _load("test_lab12_planner").test_zero_shards_over_dp_times_cp,
        _load("test_planner").test_the_gradient_ring_runs_over_dp_times_cp_ranks,
        test_cp_halves_the_sharded_states_against_the_same_dp,
    ]
    for check in checks:
        check()
    monkeypatch.setattr(ParallelConfig, "shard", property(lambda c: c.shard_group or c.dp))
    monkeypatch.setattr(ParallelConfig, "expert_shard", property(lambda c: c.dp // c.ep))
    for check in checks:
        with pytest.raises(AssertionError):
            check()


@pytest.mark.parametrize("zero", [1, 2])
def test_zero12_first_parameter_gather_stays_exposed(zero: int) -> None:
    """Catches the next step's parameter all-gather hidden whole: the first layer waits for its
    gather (Megatron-LM dispatches it in that layer's forward pre-hook), so at least one layer's
    share of it stays on the critical path however long the forward is."""
    c = ParallelConfig(dp=8, tp=8, zero=zero, micro_batch=16)  # one micro-batch: long windows
    off = step_time(L8, CLUSTER, c, **KW)
    on = step_time(L8, CLUSTER, c, **KW, overlap=Overlap(**{**ONLY, "dp": True}))
    assert off.dp_param > 0
    assert on.dp >= off.dp_param / L8.llama.layers * (1 - 1e-9)
    assert "first gather exposed" in next(t.why for t in on.terms if t.name == "dp")
