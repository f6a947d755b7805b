"""The overlap model of chapter 7 (``tensor_parallel.overlap``) against cases computed by hand:
one layer's backward with and without the all-reduce under the weight-gradient product, and an
all-gather + product decomposed into chunks (collective matmul)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from minitorch_dist.tensor_parallel import collective_matmul, tp_backward_timeline

# h = 8, f = 16, two heads of 4 (two kv heads), b = 1, s = 4, t = 2, p = 2 bytes
CFG = SimpleNamespace(hidden=8, ffn_hidden=16, heads=2, kv_heads=2, head_dim=4)
SHAPE = dict(micro_batch=1, seq_len=4, tp=2, flops=1.0)
# by hand, in FLOP (flops = 1 FLOP/s, so also seconds): 2 m k n per product
MLP_ROW = 2 * 4 * 8 * 8  # w2: (4 x 8) @ (8 x 8) per rank, for dX and again for dW
MLP_COL = 2 * 4 * 8 * 16  # w1 and w3: (4 x 8) @ (8 x 2 * 8)
ATT_ROW = 2 * 4 * 4 * 8  # wo: (4 x 4) @ (4 x 8)
ATT_CORE = 4 * 1 * 4 * 4 * 8 // 2  # 2x the causal forward's 2 b s^2 h / t
ATT_COL = 2 * 4 * 8 * (4 + 2 * 4)  # wq (4 columns) + wk, wv (one kv head of 4 each)
COMPUTE = 2 * MLP_ROW + 2 * MLP_COL + 2 * ATT_ROW + ATT_CORE + 2 * ATT_COL
ALL_REDUCE_BYTES = 2 * (2 - 1) / 2 * 1 * 4 * 8 * 2  # ring: 2 (t-1)/t of b s h p


def test_layer_backward_by_hand_bandwidth_high():
    """At 1 byte/s the two all-reduces (64 s each) hide under the dW products (1024 s, 768 s):
    exposed 0 with overlap, all 128 s without. Catches a missing product (the column linear's
    dW counted once), the kv heads counted as query heads, all four all-reduces put in the
    backward."""
    assert COMPUTE == 5376
    serial = tp_backward_timeline(CFG, **SHAPE, bandwidth=1.0, overlap=False)
    overlapped = tp_backward_timeline(CFG, **SHAPE, bandwidth=1.0, overlap=True)
    for run in (serial, overlapped):
        assert run["compute"] == pytest.approx(COMPUTE)
        assert run["comm"] == pytest.approx(2 * ALL_REDUCE_BYTES)
    assert serial["total"] == pytest.approx(COMPUTE + 128)
    assert serial["exposed"] == pytest.approx(128)
    assert overlapped["total"] == pytest.approx(COMPUTE)
    assert overlapped["exposed"] == pytest.approx(0, abs=1e-9)


def test_layer_backward_by_hand_all_reduce_longer_than_dw():
    """Bandwidth such that an all-reduce takes 2000 s: overlap hides only the dW products,
    exposed (2000 - 1024) + (2000 - 768) = 2208 s, against 4000 s serial. Catches an overlap
    that hides the whole all-reduce (exposed 0) or the next region not waiting for it."""
    bandwidth = ALL_REDUCE_BYTES / 2000
    serial = tp_backward_timeline(CFG, **SHAPE, bandwidth=bandwidth, overlap=False)
    overlapped = tp_backward_timeline(CFG, **SHAPE, bandwidth=bandwidth, overlap=True)
    assert serial["exposed"] == pytest.approx(4000)
    assert overlapped["exposed"] == pytest.approx((2000 - MLP_COL) + (2000 - ATT_COL))
    assert overlapped["total"] == pytest.approx(COMPUTE + 2208)
    # the events never overlap within a stream, and each dW starts right after its dX
    for stream in ("compute", "comm"):
        spans = sorted((a, b) for s, _, a, b in overlapped["events"] if s == stream)
        assert all(b1 <= a2 + 1e-9 for (_, b1), (a2, _) in zip(spans, spans[1:]))


def test_latency_is_2_t_minus_1_alphas_per_all_reduce():
    """alpha = 1 s at t = 2: each all-reduce takes 2 (t - 1) alpha = 2 s more. Catches the
    latency counted once per all-reduce or per byte."""
    base = tp_backward_timeline(CFG, **SHAPE, bandwidth=1.0, overlap=False)
    slow = tp_backward_timeline(CFG, **SHAPE, bandwidth=1.0, alpha=1.0, overlap=False)
    assert slow["comm"] - base["comm"] == pytest.approx(2 * 2)


def test_collective_matmul_by_hand():
    """t = 4, product 4 s (1 s a chunk): a 3 s all-gather (1 s a shard) hides entirely,
    total 4 s; a 6 s one (2 s a shard) gives 1 + 3 x 2 = 7 s, exposed 3 s; undecomposed 10 s.
    Catches chunk k started before shard k arrived, or t chunks of comm instead of t - 1."""
    hidden = collective_matmul(gather_seconds=3.0, gemm_seconds=4.0, tp=4)
    assert hidden["total"] == pytest.approx(4.0) and hidden["exposed"] == pytest.approx(0.0)
    slow = collective_matmul(gather_seconds=6.0, gemm_seconds=4.0, tp=4)
    assert slow["total"] == pytest.approx(7.0) and slow["exposed"] == pytest.approx(3.0)
    serial = collective_matmul(gather_seconds=6.0, gemm_seconds=4.0, tp=4, decompose=False)
    assert serial["total"] == pytest.approx(10.0) and serial["exposed"] == pytest.approx(6.0)
    for s, label, start, _ in slow["events"]:
        if s == "compute" and label != "chunk 0":
            k = int(label.split()[1])
            assert start >= 2.0 * k - 1e-9, f"{label} started at {start}, before shard {k} arrived"


def test_bad_input_is_a_value_error():
    """A zero bandwidth or a negative time is a ValueError naming it, not a division by zero."""
    with pytest.raises(ValueError, match="bandwidth"):
        tp_backward_timeline(CFG, **SHAPE, bandwidth=0.0)
    with pytest.raises(ValueError, match="gather_seconds"):
        collective_matmul(gather_seconds=-1.0, gemm_seconds=1.0, tp=2)
