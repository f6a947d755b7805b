"""The planner (chapter 12): its parts equal the closed forms they are built from, bad input is
refused with the rule named, the ranking is deterministic, and the published layouts fit.

Not graded (no ``lab12`` marker): the graded tests of lab12.1 and lab12.2 are in
test_lab12_planner.py.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time

import pytest

from minitorch_dist.comm import multi_node_ring_bandwidth
from minitorch_dist.context_parallel.cost import ring_bytes_per_rank
from minitorch_dist.expert_parallel import all_to_all_bytes, ep_step_bytes
from minitorch_dist.memory import activation_bytes, model_state_bytes
from minitorch_dist.memory.flops import flops_per_token
from minitorch_dist.models import LlamaConfig, split_layers
from minitorch_dist.pipeline import (
    bubble_fraction,
    first_stage_activation_factor,
    make_schedule,
    p2p_bytes,
    simulate,
)
from minitorch_dist.planner import (
    PUBLISHED,
    Cluster,
    ParallelConfig,
    as_model,
    comm_bytes,
    completions,
    evaluate_published,
    in_flight,
    micro_batches,
    peak_memory,
    plan,
    rank,
    rank_memory,
    recorded_verdict,
    step_time,
    validate,
)
from minitorch_dist.tensor_parallel import tp_comm_bytes
from minitorch_dist.zero.measure import zero_comm_bytes

L70 = as_model("llama-3-70b")
H100 = Cluster.from_preset("dgx-h100", 64)
KW = {"seq_len": 4096, "global_batch": 256}


def test_model_states_equal_the_estimator():
    """Catches model states that are not ``model_state_bytes`` of ``num_params_per_rank`` with
    ZeRO over dp (a planner with its own bytes-per-parameter table would drift from chapter 6)."""
    for zero in (0, 1, 2, 3):
        c = ParallelConfig(dp=4, tp=4, pp=4, zero=zero)
        for stage in (0, 3):
            got = rank_memory(L70, c, **KW, stage=stage)
            psi = L70.llama.num_params_per_rank(tp=4, pp=4, stage=stage)
            want = model_state_bytes(psi, zero_stage=zero, dp=4)
            assert {k: got[k] for k in ("params", "grads", "optimizer")} == {
                k: want[k] for k in ("params", "grads", "optimizer")
            }


def test_activations_equal_the_estimator_times_layers_in_flight():
    """Catches activations that are not Korthikanti's per-layer bytes (with tp, sp, cp and the
    recompute policy) times the stage's layers times the micro-batches it holds."""
    c = ParallelConfig(dp=2, tp=4, pp=4, v=2, cp=2, sp=True, recompute="selective", micro_batch=2)
    m = 256 // (2 * 2)
    per_layer = activation_bytes(
        seq_len=4096,
        micro_batch=2,
        hidden=8192,
        heads=64,
        tp=4,
        sp=True,
        recompute="selective",
        cp=2,
    )
    for stage in (0, 3):
        got = rank_memory(L70, c, **KW, stage=stage)["activations"]
        assert got == round(per_layer * split_layers(80, 4)[stage] * in_flight(4, 2, m, stage))
    assert in_flight(4, 2, m, 0) == 4 * first_stage_activation_factor(4, 2)


@pytest.mark.parametrize(
    ("pp", "v", "m"), [(4, 1, 8), (4, 1, 2), (4, 2, 8), (4, 2, 4), (4, 4, 8), (8, 2, 16)]
)
def test_in_flight_equals_the_simulated_peak(pp: int, v: int, m: int):
    """Catches an in-flight count that is not what the schedule really keeps alive (1F1B's
    ``p - stage``; interleaving's longer warm-up), checked against chapter 9's simulator."""
    kind = "1f1b" if v == 1 else "interleaved"
    peaks = simulate(make_schedule(kind, pp, m, v)).peak_in_flight
    assert [in_flight(pp, v, m, s) for s in range(pp)] == [p / v for p in peaks]


def test_last_stage_holds_the_vocab_parallel_log_probs():
    """Catches a peak that forgets the loss's fp32 log-probabilities on the last stage."""
    c = ParallelConfig(dp=8, tp=8, pp=1)
    got = rank_memory(L70, c, **KW)
    assert got["logits"] == 4 * 1 * 4096 * 128256 // 8
    assert got["total"] == sum(
        got[k] for k in ("params", "grads", "optimizer", "activations", "logits")
    )


def test_comm_bytes_equal_the_per_package_closed_forms():
    """Catches a planner whose bytes differ from chapters 6-10's formulas."""
    c = ParallelConfig(dp=2, tp=4, pp=4, v=2, cp=2, sp=True, zero=1, recompute="full")
    m = 256 // 2
    got = comm_bytes(L70, c, **KW)
    layers = split_layers(80, 4)[0]
    assert got["tp"] == m * layers * tp_comm_bytes(
        micro_batch=1, seq_len=2048, hidden=8192, tp=4, recompute="full", sp=True
    )
    assert got["cp"] == m * layers * 4 * ring_bytes_per_rank(1, 2, 4096, 128, 2)
    assert got["pp"] == m * 2 * 2 * p2p_bytes(
        micro_batch=1, seq_len=2048, hidden=8192, tp=4, sp=True
    )
    psi = L70.llama.num_params_per_rank(tp=4, pp=4)
    assert got["dp"] == zero_comm_bytes(psi, 1, 2 * 2, grad_acc=m)  # over dp x cp = 4 ranks


def test_pipeline_messages_without_sp_use_scatter_gather():
    """Catches a planner that charges each TP rank the whole b s h per pipeline message without
    sequence parallelism: Megatron-LM's runs of Narayanan et al. (section 4.1) send a 1 / t slice
    from each TP rank and all-gather the slices over the receiving TP group, booked on tp."""
    c = ParallelConfig(dp=2, tp=4, pp=4, v=2, sp=False, zero=1)
    m = micro_batches(c, KW["global_batch"])
    got = comm_bytes(L70, c, **KW)
    slice_ = 1 * 4096 * 8192 // 4 * 2
    assert got["pp"] == m * 2 * 2 * slice_
    layers = split_layers(80, 4)[0]
    per_layer = tp_comm_bytes(micro_batch=1, seq_len=4096, hidden=8192, tp=4)
    assert got["tp"] == m * layers * per_layer + got["pp"] * 3  # the all-gathers' 3 slices
    assert got["pp"] == comm_bytes(L70, dataclasses.replace(c, sp=True), **KW)["pp"]


def test_the_gradient_ring_runs_over_dp_times_cp_ranks():
    """Catches a ZeRO exchange over the dp ranks alone when cp > 1: the gradient reduce-scatter
    and the parameter all-gather run over the dp x cp ranks holding the same weights, a block
    of dp cp ranks tp apart (TP innermost, then CP, then DP); experts over dp / ep x cp. And
    the search tries ZeRO when dp = 1 but cp > 1 (there is something to shard)."""
    c = ParallelConfig(dp=8, tp=4, cp=2, zero=1)  # 64 GPUs: the group of 16 has 2 per node
    m = micro_batches(c, KW["global_batch"])
    psi = L70.llama.num_params_per_rank(tp=4)
    sent = comm_bytes(L70, c, **KW)["dp"]
    assert sent == zero_comm_bytes(psi, 1, 16, grad_acc=m)
    link = H100.link(16, 4)
    assert link.bandwidth == multi_node_ring_bandwidth(
        intra_bandwidth=H100.intra_bandwidth, nic_bandwidth=H100.nic_share, nics_per_node=2, nodes=8
    )
    passes = sent * 16 / (15 * 2 * psi)  # ring passes, each 15 messages
    assert step_time(L70, H100, c, **KW).dp == pytest.approx(
        sent / link.bandwidth + passes * 15 * link.alpha, rel=1e-12
    )
    mixtral = as_model("mixtral-8x7b")
    moe = ParallelConfig(dp=4, cp=2, ep=2, zero=1)
    dense, expert = mixtral.params_per_rank(tp=1, pp=1, ep=2)
    got = comm_bytes(mixtral, moe, seq_len=4096, global_batch=64)
    assert got["dp"] == zero_comm_bytes(dense, 1, 8, grad_acc=16)
    assert got["dp_expert"] == zero_comm_bytes(expert, 1, 4, grad_acc=16)
    only = {"dp": 1, "tp": 8, "pp": 1, "cp": 8, "micro_batch": 1}
    rows = plan(as_model("llama-3-8b"), H100, **KW, only=only).rows
    assert {r.config.zero for r in rows} == {0, 1, 2, 3}


def test_ep_bytes_equal_the_all_to_all_closed_form():
    """Catches expert-parallel traffic that is not four uniform all-to-alls per MoE layer."""
    mixtral = as_model("mixtral-8x7b")
    c = ParallelConfig(dp=8, ep=8, pp=1)
    got = comm_bytes(mixtral, c, seq_len=4096, global_batch=64)
    dispatch = all_to_all_bytes(tokens=4096, top_k=2, hidden=4096, ep=8)
    assert got["ep"] == 64 // 8 * ep_step_bytes(dispatch, moe_layers=32)


def test_link_model_knows_nodes_and_nics():
    """Catches a link model that gives a cross-node ring NVLink's bandwidth, or ignores how many
    of the node's ports a group can use."""
    cl = Cluster.from_preset("dgx-h100", 64)
    assert cl.link(8, 1).bandwidth == cl.intra_bandwidth and not cl.link(8, 1).inter_node
    one_per_node = cl.link(8, 8)  # a DP group of 8, one rank per node: one port's share
    assert one_per_node.inter_node and one_per_node.bandwidth == cl.nic_share == 50e9
    four_per_node = cl.link(16, 2)  # 4 members per node: 4 ports' share, capped by NVLink
    assert four_per_node.bandwidth == multi_node_ring_bandwidth(
        intra_bandwidth=cl.intra_bandwidth, nic_bandwidth=cl.nic_share, nics_per_node=4, nodes=4
    )
    assert four_per_node.bandwidth == 200e9


def test_step_time_parts_add_up_and_mfu_is_narayanans():
    """Catches a total that is not compute + communication + bubble, or an MFU that counts the
    recomputation as useful work (Narayanan et al. 2021, eq. (3) without the recompute pass)."""
    c = ParallelConfig(dp=4, tp=4, pp=4, sp=True, recompute="full")
    t = step_time(L70, H100, c, **KW)
    work = t.compute + t.tp + t.cp + t.ep + t.pp
    assert t.bubble == pytest.approx(work * bubble_fraction(4, 64))
    assert t.total == pytest.approx(work + t.bubble + t.dp + t.offload)
    model_flops = flops_per_token(L70.llama, seq_len=4096) * 256 * 4096
    assert t.mfu == pytest.approx(model_flops / (t.total * 64 * 989e12))
    hardware = flops_per_token(L70.llama, seq_len=4096, recompute="full") * 256 * 4096
    assert t.compute == pytest.approx(hardware / (64 * 989e12 * 0.6))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"dp": 2, "tp": 8, "pp": 2}, "dp*tp*pp*cp"),
        ({"dp": 4, "tp": 16, "pp": 1}, "gpus_per_node"),
        ({"dp": 8, "tp": 1, "pp": 8, "v": 16}, "layers=80 < pp*v"),
        ({"dp": 1, "tp": 8, "pp": 1, "cp": 8, "micro_batch": 1}, "2*cp"),
        ({"dp": 64, "tp": 1, "pp": 1, "micro_batch": 8}, "global_batch=256 is not divisible"),
        ({"dp": 16, "tp": 1, "pp": 4, "v": 2, "micro_batch": 8}, "divisible by pp=4"),
        ({"dp": 64, "tp": 1, "pp": 1, "ep": 2}, "ep=2 > 1 needs a mixture-of-experts"),
        ({"dp": 32, "tp": 1, "pp": 2, "v": 2, "sp": True}, "sp=True needs tp > 1"),
    ],
)
def test_validation_names_the_broken_rule(changes: dict, message: str):
    """Catches a configuration accepted although it cannot run (or refused without saying why)."""
    c = ParallelConfig(**changes)
    kw = {"global_batch": 256, "seq_len": 8 if "cp" in changes else 4096}
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        validate(L70, H100, c, **kw)


def test_validation_of_model_divisibility():
    """Catches heads, kv heads and experts that do not divide by their group."""
    odd = as_model(LlamaConfig("odd", 256, 96, 4, 6, 3, 192, 256, 1e-5, 1e4))
    cl = Cluster.from_preset("dgx-h100", 8)
    with pytest.raises(ValueError, match="heads=6 is not divisible by tp=4"):
        validate(odd, cl, ParallelConfig(dp=2, tp=4), global_batch=8, seq_len=64)
    with pytest.raises(ValueError, match="kv_heads=3"):
        validate(odd, cl, ParallelConfig(dp=4, tp=2), global_batch=8, seq_len=64)
    mixtral = as_model("mixtral-8x7b")
    with pytest.raises(ValueError, match="experts=8 is not divisible by ep=16"):
        validate(
            mixtral,
            Cluster.from_preset("dgx-h100", 16),
            ParallelConfig(dp=16, ep=16),
            global_batch=16,
            seq_len=64,
        )
    ok = Cluster.from_preset("dgx-h100", 64, tp_across_nodes=True)
    validate(L70, ok, ParallelConfig(dp=4, tp=16), global_batch=256, seq_len=4096)


def test_bad_cluster_and_config_fields():
    with pytest.raises(ValueError, match="whole number of nodes"):
        Cluster.from_preset("dgx-h100", 12)
    with pytest.raises(ValueError, match="recompute"):
        ParallelConfig(recompute="some")
    with pytest.raises(ValueError, match="unknown cluster"):
        Cluster.from_preset("dgx-z", 8)


def test_ranking_is_deterministic_and_sorted():
    """Catches a ranking that depends on enumeration order (equal times in another order on
    another machine) or is not by predicted step time."""
    a = plan("llama-3-8b", Cluster.from_preset("dgx-h100", 16), global_batch=64, seq_len=4096)
    b = plan("llama-3-8b", Cluster.from_preset("dgx-h100", 16), global_batch=64, seq_len=4096)
    assert [r.config for r in a.rows] == [r.config for r in b.rows]
    times = [r.time.total for r in a.fitting]
    assert times == sorted(times) and a.rejected and all(r.reason for r in a.rejected)
    shuffled = list(a.rows)
    random.Random(0).shuffle(shuffled)
    assert [r.config for r in rank(shuffled)] == [r.config for r in a.rows]
    best = a.fitting[0]
    assert best.memory == peak_memory(
        as_model("llama-3-8b"), best.config, seq_len=4096, global_batch=64
    )


def test_every_published_layout_fits_under_the_planner():
    """Catches a memory model so pessimistic that layouts which trained for real would not fit
    (Narayanan Table 1, Llama 3 405B Table 4, DeepSeek-V3)."""
    for run in PUBLISHED:
        rows = completions(run)
        assert any(r.fits for r in rows), (run.label, rows[0].reason)


def test_a_recorded_verdict_is_the_full_searchs():
    """Catches a recorded verdict (chapter 12 reads them) that differs from the search it stands
    for, and a record whose choice does not fit or whose rank says the layout does not fit."""
    run = PUBLISHED[0]
    full = evaluate_published(run)
    best = dataclasses.asdict(full.best.config)
    assert recorded_verdict(run, full.rank, full.fitting, best) == full
    assert recorded_verdict(run, full.rank + 1, full.fitting, best) != full
    with pytest.raises(ValueError, match="not one fitting configuration"):
        recorded_verdict(run, full.rank, full.fitting, {**best, "dp": 3})
    with pytest.raises(ValueError, match="recorded rank None"):
        recorded_verdict(run, None, full.fitting, best)


def test_70b_on_1024_gpus_is_planned_quickly():
    """The issue's bound is 5 s on 2 cores (benchmarks/planner_speed.py prints the time); this
    test allows six times that, in CPU seconds (the planner is one thread of pure Python), so
    other jobs on the machine do not count."""
    start = time.process_time()
    result = plan(
        "llama-3-70b", Cluster.from_preset("dgx-h100", 1024), global_batch=1024, seq_len=4096
    )
    assert time.process_time() - start < 30
    assert len(result.fitting) > 1000 and math.isfinite(result.fitting[0].time.total)


# -- the widget ----------------------------------------------------------------------------------
def test_render_config_shows_the_planners_numbers():
    """Catches a widget whose bytes, fit verdict, step time or rank differ from the planner's."""
    from minitorch_dist.viz import render_config

    cluster = Cluster.from_preset("dgx-h100", 16)
    result = plan("llama-3-8b", cluster, global_batch=64, seq_len=4096)
    best = result.fitting[3]
    text = render_config(result, best.config)
    assert f'data-bytes="{best.memory["total"]}"' in text and 'data-fits="true"' in text
    assert 'data-rank="4"' in text and f'data-total="{best.time.total!r}"' in text
    bad = ParallelConfig(dp=1, tp=16)
    assert 'data-valid="false"' in render_config(result, bad) and "gpus_per_node" in render_config(
        result, bad
    )


def test_planner_widget_follows_its_controls():
    """Catches controls that do not reach the configuration (dp not derived from the GPUs and
    the other axes, say)."""
    pytest.importorskip("ipywidgets")
    from minitorch_dist.viz import planner_widget

    w = planner_widget(model="llama-3-8b", gpus=16, global_batch=64, tp=2, pp=2, cp=1)
    assert w.config.dp == 4 and w.config.tp == 2 and w.config.pp == 2
    w.set(pp=4, v=2, zero=3, recompute="full")
    assert (w.config.dp, w.config.v, w.config.zero, w.config.recompute) == (2, 2, 3, "full")
    row = next(r for r in w.plan.fitting if r.config == w.config)
    assert f'data-total="{row.time.total!r}"' in w.view.value


def test_planner_memory_benchmark_runs_on_the_cpu(tmp_path):
    """Catches a broken benchmarks/planner_memory.py before it costs GPU time: the CPU path runs
    the tiny model and writes its table; the planner is within a factor 1.5 of the tracker."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    run = subprocess.run(
        [sys.executable, "benchmarks/planner_memory.py", "--device", "cpu", "--out", str(tmp_path)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    text = (tmp_path / "cpu_planner_memory.md").read_text()
    ratio = float(re.search(r"measured / predicted = ([0-9.]+)", text).group(1))
    assert 1 / 1.5 < ratio < 1.5


def test_ep_bytes_under_full_recomputation_count_six_all_to_alls():
    """Catches a planner that counts four all-to-alls per MoE layer when full recomputation
    re-runs the layer's dispatch and combine (six, chapter 10's all_to_alls_per_step)."""
    from minitorch_dist.expert_parallel import all_to_alls_per_step
    from minitorch_dist.planner.cost import _messages

    mixtral = as_model("mixtral-8x7b")
    kw = {"seq_len": 4096, "global_batch": 64}
    dispatch = all_to_all_bytes(tokens=4096, top_k=2, hidden=4096, ep=8)
    for recompute in ("none", "selective", "full"):
        c = ParallelConfig(dp=8, ep=8, pp=1, recompute=recompute)
        got = comm_bytes(mixtral, c, **kw)["ep"]
        a2a = all_to_alls_per_step(recompute)
        assert got == 64 // 8 * a2a * 32 * dispatch
        assert _messages(mixtral, c, 8, 32, 32)["ep"] == 8 * 32 * a2a * 7
    assert all_to_alls_per_step("full") == 6
