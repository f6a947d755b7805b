"""The planner's fit test and cost model (lab12.1) and choosing a configuration (lab12.2).

Each expected number is worked by hand from the formulas the chapter derives (ZeRO's shards,
Korthikanti's activations times the micro-batches in flight, the ring's ``(t - 1) / t``, the
alpha-beta link, the bubble ``(p - 1) / (v m)``), with the model and cluster small enough that
the test reads as the calculation. Each test's docstring names the wrong answer it catches.
"""

from __future__ import annotations

import pytest

from minitorch_dist.memory import activation_bytes
from minitorch_dist.memory.flops import flops_per_token
from minitorch_dist.pipeline import p2p_bytes
from minitorch_dist.planner import (
    Cluster,
    ParallelConfig,
    Row,
    StepTime,
    as_model,
    choose,
    peak_memory,
    plan,
    rank,
    rank_memory,
    step_time,
)
from minitorch_dist.zero.measure import zero_comm_bytes

L8 = as_model("llama-3-8b")
N8 = 8_030_261_248  # Llama 3 8B's parameters
ONE_NODE = Cluster.from_preset("dgx-h100", 8)
TWO_NODES = Cluster.from_preset("dgx-h100", 16)
S, B = 4096, 64  # sequence length, global batch (sequences)


def _per_layer(**kw: object) -> int:
    args = {
        "seq_len": S,
        "micro_batch": 1,
        "hidden": 4096,
        "heads": 32,
        "tp": 1,
        "sp": False,
        "recompute": "selective",
        "cp": 1,
    } | kw
    return activation_bytes(**args)


# -- lab12.1: the fit test ---------------------------------------------------------------------
@pytest.mark.lab12
@pytest.mark.task("lab12.1")
def test_zero_shards_the_optimizer_over_dp():
    """Catches forgetting that ZeRO divides by dp: stage 1 keeps 12 bytes per parameter of a
    1/dp shard, stage 3 shards the 16-bit parameters too."""
    one = rank_memory(L8, ParallelConfig(dp=16, zero=1), seq_len=S, global_batch=B)
    assert assert_states(one, params=2 * N8, grads=2 * N8, optimizer=12 * -(-N8 // 16))
    three = rank_memory(L8, ParallelConfig(dp=16, zero=3), seq_len=S, global_batch=B)
    shard = -(-N8 // 16)
    assert assert_states(three, params=2 * shard, grads=2 * shard, optimizer=12 * shard)


def assert_states(got: dict, **want: int) -> bool:
    have = {k: got[k] for k in want}
    assert have == want, f"ZeRO shards over dp: stage k divides its states by dp; {have} != {want}"
    return True


@pytest.mark.lab12
@pytest.mark.task("lab12.1")
def test_experts_shard_over_dp_over_ep():
    """Catches sharding the experts' states over all dp ranks: each expert is replicated on only
    dp / ep of them, so its ZeRO shard is 1 / (dp / ep)."""
    mixtral = as_model("mixtral-8x7b")
    dense, expert = mixtral.params_per_rank(tp=1, pp=1, ep=4)
    got = rank_memory(mixtral, ParallelConfig(dp=8, ep=4, zero=1), seq_len=S, global_batch=B)
    want = 12 * -(-dense // 8) + 12 * -(-expert // 2)
    assert got["optimizer"] == want, (
        f"Mixtral, dp = 8, ep = 4, ZeRO-1: {got['optimizer']} optimizer bytes, not {want}: the "
        "dense weights' states shard over the 8 dp ranks, each expert's over the dp / ep = 2 "
        "ranks that hold it"
    )
    assert got["params"] == 2 * (dense + expert), (
        f"ZeRO-1 keeps the rank's 16-bit weights whole: {got['params']}, not 2 x {dense + expert}"
    )


@pytest.mark.lab12
@pytest.mark.task("lab12.1")
def test_zero_shards_over_dp_times_cp():
    """Catches sharding over dp alone when cp > 1: the cp ranks of a sequence hold the same
    weights and reduce their gradients together, so ZeRO shards over dp x cp (Megatron-LM's
    distributed optimizer with context parallelism, torchtitan's dp_shard_cp); experts over
    dp / ep x cp."""
    c = ParallelConfig(dp=4, cp=2, zero=1)
    got = rank_memory(L8, c, seq_len=S, global_batch=B)
    assert got["optimizer"] == 12 * -(-N8 // 8)
    three = rank_memory(L8, ParallelConfig(dp=4, cp=2, zero=3), seq_len=S, global_batch=B)
    assert three["params"] == 2 * -(-N8 // 8)
    mixtral = as_model("mixtral-8x7b")
    dense, expert = mixtral.params_per_rank(tp=1, pp=1, ep=2)
    moe = ParallelConfig(dp=4, cp=2, ep=2, zero=1)
    got = rank_memory(mixtral, moe, seq_len=S, global_batch=B)
    assert got["optimizer"] == 12 * -(-dense // 8) + 12 * -(-expert // 4)


@pytest.mark.lab12
@pytest.mark.task("lab12.1")
def test_first_stage_holds_p_micro_batches_last_stage_one():
    """Catches activations of one micro-batch on every stage (1F1B's first stage holds p of
    them), or p on every stage, or a last stage without the loss's log-probabilities."""
    c = ParallelConfig(dp=4, pp=4)  # m = 64 / 4 = 16 micro-batches, 8 layers per stage
    first = rank_memory(L8, c, seq_len=S, global_batch=B, stage=0)
    last = rank_memory(L8, c, seq_len=S, global_batch=B, stage=3)
    assert first["activations"] == 8 * 4 * _per_layer() and first["logits"] == 0, (
        f"pp = 4, stage 0: {first['activations']} bytes of activations and {first['logits']} of "
        f"logits, not 8 layers x p = 4 micro-batches in flight ({8 * 4 * _per_layer()}) and no "
        "logits: 1F1B's first stage holds p micro-batches, only the last stage has the head"
    )
    assert last["activations"] == 8 * 1 * _per_layer(), (
        f"pp = 4, last stage: {last['activations']} bytes of activations, not 8 layers x one "
        f"micro-batch ({8 * _per_layer()}): 1F1B's last stage holds one micro-batch in flight"
    )
    assert last["logits"] == 4 * S * 128256, (  # fp32, one micro-batch of one sequence
        f"last stage: {last['logits']} bytes of logits, not fp32 s x V = {4 * S * 128256}"
    )
    assert peak_memory(L8, c, seq_len=S, global_batch=B)["stage"] == 0


@pytest.mark.lab12
@pytest.mark.task("lab12.1")
def test_interleaving_and_a_short_batch_change_what_is_in_flight():
    """Catches ignoring interleaving's longer warm-up (1 + (p-1)/(pv) times 1F1B's p on the
    first stage) and holding more micro-batches than the step has."""
    c = ParallelConfig(dp=4, pp=4, v=2)  # (v + 1) p - 1 = 11 chunks of half a stage: 5.5
    got = rank_memory(L8, c, seq_len=S, global_batch=B, stage=0)
    want = round(8 * 5.5 * _per_layer())
    assert got["activations"] == want, (
        f"pp = 4, v = 2, stage 0: {got['activations']} bytes of activations, not {want}: "
        "interleaving's warm-up keeps (v + 1) p - 1 = 11 chunks of half a stage in flight "
        "(p (1 + (p - 1) / (p v)) micro-batches), not 1F1B's p"
    )
    short = ParallelConfig(dp=32, pp=4, micro_batch=1)  # 64 / 32 = 2 micro-batches in all
    got = rank_memory(as_model("llama-3-8b"), short, seq_len=S, global_batch=B, stage=0)
    assert got["activations"] == 8 * 2 * _per_layer(), (
        f"a step of 2 micro-batches on pp = 4: {got['activations']} bytes of activations, not "
        "8 layers x 2: no more micro-batches are in flight than the step has, min(p, m)"
    )


@pytest.mark.lab12
@pytest.mark.task("lab12.1")
def test_tp_sp_and_cp_cut_the_activations():
    """Catches activations not divided by tp (with sp) and cp, and a vocab-parallel head whose
    log-probabilities are not split over tp."""
    c = ParallelConfig(dp=2, tp=4, cp=2, sp=True)
    got = rank_memory(L8, c, seq_len=S, global_batch=B)
    assert got["activations"] == 32 * _per_layer(tp=4, sp=True, cp=2)
    assert got["logits"] == 4 * (S // 2) * 128256 // 4


# -- lab12.1: the cost model -------------------------------------------------------------------
@pytest.mark.lab12
@pytest.mark.task("lab12.1")
def test_compute_time_is_the_steps_flops_over_the_gpus():
    """Catches compute time without the recomputation's FLOPs, or not over every GPU."""
    t = step_time(L8, ONE_NODE, ParallelConfig(dp=8, recompute="full"), seq_len=S, global_batch=B)
    flops = flops_per_token(L8.llama, seq_len=S, recompute="full") * B * S
    assert t.compute == pytest.approx(flops / (8 * 989e12 * 0.6), rel=1e-12)


@pytest.mark.lab12
@pytest.mark.task("lab12.1")
def test_tp_time_counts_t_minus_1_over_t_on_nvlink():
    """Catches TP bytes without the ring's (t - 1) / t (8 b s h instead of 8 b s h 7/8) and TP
    messages without their latency."""
    c = ParallelConfig(dp=1, tp=8, micro_batch=1)  # 64 micro-batches, 32 layers
    t = step_time(L8, ONE_NODE, c, seq_len=S, global_batch=B)
    sent = 64 * 32 * 8 * S * 4096 * 7 // 8 * 2  # four all-reduces: 8 b s h (t-1)/t, 2 bytes
    messages = 64 * 32 * 4 * 2 * 7  # each all-reduce is 2 (t - 1) ring steps
    assert t.tp == pytest.approx(sent / 450e9 + messages * 5e-6, rel=1e-12)


@pytest.mark.lab12
@pytest.mark.task("lab12.1")
def test_the_bubble_is_p_minus_1_over_vm_of_the_work():
    """Catches ignoring the pipeline bubble, or the bubble of plain 1F1B under interleaving."""
    for v in (1, 2):
        t = step_time(L8, TWO_NODES, ParallelConfig(dp=4, pp=4, v=v), seq_len=S, global_batch=B)
        work = t.compute + t.tp + t.cp + t.ep + t.pp
        assert t.bubble == pytest.approx(work * 3 / (v * 16), rel=1e-12)
        assert t.total == pytest.approx(work + t.bubble + t.dp + t.offload, rel=1e-12)


@pytest.mark.lab12
@pytest.mark.task("lab12.1")
def test_dp_across_nodes_runs_at_one_ports_share():
    """Catches treating the inter-node link as intra-node: with tp = 8 filling each node, the two
    data-parallel replicas talk through one 400 Gb/s port each (50 GB/s), not NVLink."""
    c = ParallelConfig(dp=2, tp=8, zero=1)
    t = step_time(L8, TWO_NODES, c, seq_len=S, global_batch=B)
    psi = L8.llama.num_params_per_rank(tp=8)
    sent = zero_comm_bytes(psi, 1, 2, grad_acc=32)  # reduce-scatter + all-gather
    assert t.dp == pytest.approx(sent / 50e9 + 2 * 10e-6, rel=1e-12)


@pytest.mark.lab12
@pytest.mark.task("lab12.1")
def test_pipeline_sends_cross_nodes_when_stages_do():
    """Catches pipeline sends priced at NVLink speed when neighbouring stages sit in different
    nodes (tp = 8 fills a node, so stage 1 is the next node)."""
    c = ParallelConfig(dp=1, tp=8, pp=2, sp=True)
    t = step_time(L8, TWO_NODES, c, seq_len=S, global_batch=B)
    one = p2p_bytes(micro_batch=1, seq_len=S, hidden=4096, tp=8, sp=True)
    assert t.pp == pytest.approx(64 * 2 * (one / 50e9 + 10e-6), rel=1e-12)


# -- lab12.2: choosing ---------------------------------------------------------------------------
def _fake_row(dp: int, total: float, memory: int, reason: str = "") -> Row:
    time = None if reason else StepTime(total, 0, 0, 0, 0, 0, 0, 0, total, 0.5, 1.0)
    return Row(ParallelConfig(dp=dp), {"total": memory}, time, reason)


@pytest.mark.lab12
@pytest.mark.task("lab12.2")
def test_rank_by_time_then_bytes_then_fields_rejected_last():
    """Catches ranking by memory or MFU instead of step time, ties left to input order (so two
    machines disagree), and rejected rows mixed in with those that fit."""
    rows = [
        _fake_row(4, 2.0, 10),
        _fake_row(1, 1.0, 30),
        _fake_row(3, 1.0, 20),
        _fake_row(5, 0.5, 99, reason="needs too much"),
        _fake_row(2, 1.0, 20),
    ]
    why = "rank fitting rows by predicted step time (ties: fewer bytes, then fields), rejected last"
    assert [r.config.dp for r in rank(rows)] == [2, 3, 1, 4, 5], why
    assert [r.config.dp for r in rank(rows[::-1])] == [2, 3, 1, 4, 5], why


@pytest.mark.lab12
@pytest.mark.task("lab12.2")
def test_choose_returns_the_fastest_fitting_config_and_its_numbers():
    """Catches a choice that is not the fastest configuration that fits, and numbers that do
    not defend it: the runner-up's margin, how many fit, the largest overhead."""
    choice = choose("llama-3-8b", TWO_NODES, global_batch=B, seq_len=S)
    result = plan("llama-3-8b", TWO_NODES, global_batch=B, seq_len=S)
    order = [r for r in rank(result.rows) if r.fits]  # the ranking, checked on its own above
    assert order[0].time.total == min(r.time.total for r in result.rows if r.fits), (
        "the first fitting configuration is not the fastest: rank sorts by predicted step time"
    )
    assert choice.config == order[0].config and choice.time == order[0].time
    assert choice.memory == order[0].memory
    assert choice.runner_up == order[1].config
    assert choice.margin == order[1].time.total / order[0].time.total >= 1
    assert choice.fitting == len(order)
    overheads = sorted(["bubble", "cp", "dp", "ep", "offload", "pp", "tp"])
    worst = getattr(order[0].time, choice.bottleneck)
    assert choice.bottleneck in overheads
    assert all(getattr(order[0].time, k) <= worst for k in overheads), choice.bottleneck
    assert all(
        getattr(order[0].time, k) < worst for k in overheads[: overheads.index(choice.bottleneck)]
    ), "ties go to the first name in alphabetical order"


@pytest.mark.lab12
@pytest.mark.task("lab12.2")
def test_choose_respects_memory():
    """Catches choosing the fastest configuration whether or not it fits: on 40 GiB GPUs the
    80 GiB choice no longer fits, and the chosen one must."""
    big = choose("llama-3-8b", TWO_NODES, global_batch=B, seq_len=S)
    small_gpus = Cluster.from_preset("dgx-h100", 16, memory_bytes=24 * 2**30)
    small = choose("llama-3-8b", small_gpus, global_batch=B, seq_len=S)
    assert big.memory["total"] > 24 * 2**30, "pick a smaller memory for this test"
    assert small.memory["total"] <= 24 * 2**30 and small.config != big.config, (
        f"on 24 GiB GPUs choose picked {small.config.key()} needing "
        f"{small.memory['total'] / 2**30:.1f} GiB: it must pick the fastest configuration "
        "that fits, not the fastest one"
    )
    assert small.time.total >= big.time.total, (
        "the choice on smaller GPUs is faster than on larger ones: the larger GPUs' choice was "
        "not the fastest that fits"
    )
