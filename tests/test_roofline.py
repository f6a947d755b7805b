"""The roofline view (minitorch_dist.planner.roofline): each axis's critical size in closed form,
held against the package's own bytes and FLOPs at that size (the collective and the compute take
the same time there), the bound flipping across it, and the chapters' numbers computed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from minitorch_dist.arithmetic import run_blocked
from minitorch_dist.context_parallel.cost import min_tokens_per_rank, ring_step_times
from minitorch_dist.expert_parallel.cost import all_to_all_bytes, ep_step_bytes
from minitorch_dist.models import LlamaConfig
from minitorch_dist.pipeline.cost import bubble_fraction
from minitorch_dist.planner import Cluster, ParallelConfig, as_model, plan
from minitorch_dist.planner.roofline import (
    Phase,
    dp_critical_tokens,
    ep_critical_width,
    expert_critical_tokens,
    layer_ratio,
    link_intensity,
    pp_critical_micro_batches,
    roofline,
    tightest,
    tp_critical_hidden,
)
from minitorch_dist.tensor_parallel.cost import tp_bytes
from minitorch_dist.zero.cost import zero_comm_bytes

ROOT = Path(__file__).resolve().parent.parent
C, B = 989e12, 50e9  # an H100's dense bf16 peak; one GPU's share of a DGX H100's network


def test_closed_forms_are_the_hand_derivations():
    assert dp_critical_tokens(64, flops=C, bandwidth=B) == pytest.approx(63 / 64 * C / B)
    assert tp_critical_hidden(8, flops=C, bandwidth=B) == pytest.approx(7 * 2 / 9 * C / B)
    assert ep_critical_width(64, flops=C, bandwidth=B) == pytest.approx(4 / 9 * 63 / 64 * C / B)
    assert pp_critical_micro_batches(9, 2) == 4
    llama = LlamaConfig.from_preset("llama-3-70b")
    h, kv, f = llama.hidden, llama.kv_heads * llama.head_dim, llama.ffn_hidden
    assert layer_ratio(llama) == pytest.approx((2 * h * h + 2 * h * kv + 3 * h * f) / h**2)
    gpt = LlamaConfig("gpt", 100, 64, 1, 4, 4, 192, 16, 1e-5, 1e4)  # 4 h^2 + 3 h (3 h)
    assert layer_ratio(gpt) == 13


def test_dp_and_zero_exchanges_equal_their_windows_at_the_critical_tokens():
    psi, n = 10**9, 64
    tokens = dp_critical_tokens(n, flops=C, bandwidth=B)
    # ZeRO-0's all-reduce under the last micro-batch's backward, 4 Psi T FLOPs
    assert 4 * psi * tokens / C == pytest.approx(zero_comm_bytes(psi, 0, n) / B)
    # ZeRO-3's forward all-gather (a third of a micro-batch's bytes) under 2 Psi T FLOPs
    assert 2 * psi * tokens / C == pytest.approx(zero_comm_bytes(psi, 3, n) / 3 / B)
    # and ZeRO-1's parameter gather (half its bytes) under one micro-batch's forward
    assert 2 * psi * tokens / C == pytest.approx(zero_comm_bytes(psi, 1, n) / 2 / B)


def test_tp_collectives_equal_the_products_at_the_critical_hidden_size():
    llama = LlamaConfig.from_preset("llama-3-70b")
    r, t, b, s = layer_ratio(llama), 8, 1, 4096
    for h in (1024, 8192):
        compute = 6 * r * h * h * b * s / t / C
        comm = tp_bytes(micro_batch=b, seq_len=s, hidden=h, tp=t) / B
        # comm / compute falls as 1 / h: it is 1 exactly at h*
        critical = tp_critical_hidden(t, flops=C, bandwidth=B, ratio=r)
        assert comm / compute == pytest.approx(critical / h)
        assert (comm > compute) == (h < critical)


def test_cp_ring_step_equals_its_block_compute_at_the_critical_tokens():
    heads, kv, flops, bw = 64, 8, 4000e9, 1e9  # s/c* = 8/64 * 2 * 4000 = 1000 tokens
    per_rank = min_tokens_per_rank(heads=heads, kv_heads=kv, bandwidth=bw, flops=flops)
    assert per_rank == 1000
    shape = {"batch": 1, "heads": heads, "kv_heads": kv, "head_dim": 128, "cp": 8}
    at = ring_step_times(**shape, seq=8000, alpha=0.0, bandwidth=bw, flops=flops)
    assert at["comm"] == pytest.approx(at["compute"])
    below = ring_step_times(**shape, seq=4000, alpha=0.0, bandwidth=bw, flops=flops)
    assert below["comm"] > below["compute"]


def test_ep_all_to_alls_equal_the_experts_at_the_critical_width():
    tokens, k, h, ep = 4096, 8, 7168, 64
    f = ep_critical_width(ep, flops=C, bandwidth=B)
    comm = ep_step_bytes(all_to_all_bytes(tokens=tokens, top_k=k, hidden=h, ep=ep)) / B
    assert 18 * tokens * k * h * f / C == pytest.approx(comm)
    # tokens cancel: twice the tokens, the same width
    twice = ep_step_bytes(all_to_all_bytes(tokens=2 * tokens, top_k=k, hidden=h, ep=ep)) / B
    assert 18 * 2 * tokens * k * h * f / C == pytest.approx(twice)


def test_expert_product_meets_hbm_at_the_critical_tokens_per_expert():
    h, f, hbm = 7168, 2048, 3.35e12
    tokens = expert_critical_tokens(h, f, flops=C, hbm=hbm)
    assert 2 * tokens * h * f / C == pytest.approx(2 * (h * f + tokens * (h + f)) / hbm)
    assert C / hbm < tokens < 2 * C / hbm


def test_bubble_equals_the_work_at_the_critical_micro_batches():
    for p, v in ((9, 1), (9, 2), (17, 4)):
        m = pp_critical_micro_batches(p, v)
        assert bubble_fraction(p, int(m), v) == 1
        assert bubble_fraction(p, int(m) * 2, v) < 1


def test_phase_bound_flips_at_its_critical_intensity():
    def phase(flops: float) -> Phase:
        return Phase("dp_grad", "InfiniBand", flops, 1e9, B, C, None)

    at = phase(C / B * 1e9)
    assert at.intensity == pytest.approx(at.critical)
    assert at.flops / C == pytest.approx(at.bytes / B) == pytest.approx(at.seconds)
    assert phase(0.99 * C / B * 1e9).bound == "InfiniBand"
    assert phase(1.01 * C / B * 1e9).bound == "compute"


def test_layout_bound_flips_with_the_tokens_of_a_micro_batch():
    """Llama 3 8B on two DGX H100 nodes, ZeRO-1 over 16 ranks: the parameter gather runs under
    one micro-batch's forward, so its bound flips where b s crosses (n - 1)/n C / B."""
    model, cluster = as_model("llama-3-8b"), Cluster.from_preset("dgx-h100", 16)
    kw = {"seq_len": 2048, "global_batch": 64}
    bw = cluster.link(16, 1).bandwidth
    critical = dp_critical_tokens(16, flops=cluster.peak_flops, bandwidth=bw)
    assert 2048 < critical < 2 * 2048
    for b, bound in ((1, "InfiniBand"), (2, "compute")):
        config = ParallelConfig(dp=16, zero=1, micro_batch=b)
        phases = {p.name: p for p in roofline(model, cluster, config, **kw)}
        assert phases["dp_param"].bound == bound
        assert phases["forward"].bound == "compute"
        assert phases["optimizer"].bound == "HBM"
        assert phases["dp_param"].gap >= 1
    assert tightest(list(phases.values())).name in phases


def test_plan_reports_each_ranked_layout_roofline_and_link_intensity():
    model, cluster = as_model("llama-3-8b"), Cluster.from_preset("dgx-h100", 16)
    result = plan(model, cluster, global_batch=64, seq_len=2048, only={"tp": 8, "pp": 1})
    phases = result.roofline(result.best)
    assert {"forward", "backward", "optimizer", "tp"} <= {p.name for p in phases}
    tp = next(p for p in phases if p.name == "tp")
    assert tp.resource == "NVLink" and tp.gap > 1  # exposed TP traffic: above the roof
    flops = sum(p.flops for p in phases if p.name in ("forward", "backward"))
    nv = sum(p.bytes / p.bandwidth for p in phases if p.resource == "NVLink")
    assert link_intensity(phases, "NVLink", 1e9) == pytest.approx(flops / (nv * 1e9))


def test_roofline_imports_without_torch():
    run = run_blocked(
        "import minitorch_dist.planner.roofline as r; print(r.dp_critical_tokens(2, flops=2.0, bandwidth=1.0))"
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith("1.0")


CHAPTERS = {
    "05_collectives_and_data_parallelism.md": "dp_critical_tokens",
    "07_tensor_and_sequence_parallelism.md": "tp_critical_hidden",
    "09_pipeline_parallelism.md": "pp_critical_micro_batches",
    "10_mixture_of_experts.md": "ep_critical_width",
    "12_choosing_a_configuration.md": "plot_roofline",
}


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_chapters_compute_their_critical_sizes(name):
    """Each chapter that teaches an axis derives its critical size in a subsection that calls
    the package (no critical size typed in prose), and chapter 12 gathers them in a glued table
    and draws the published runs with plot_roofline."""
    text = (ROOT / "chapters" / name).read_text()
    assert re.search(r"^#{2,3} When does .* hide\?", text, re.M), name
    assert CHAPTERS[name] in text
    if name.startswith("12"):
        assert "{glue:md} roofline_table" in text
        assert "from minitorch_dist.planner.roofline import" in text
