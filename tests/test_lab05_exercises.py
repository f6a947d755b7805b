"""The answers to the exercises of chapter 5 and lab 5, recomputed through the package.

Each answer is computed twice, by the package (as the chapter and the lab do) and by hand from
the formulas, so a change in the package that would silently change a published answer fails
here. Not graded (no ``lab05`` marker): the graded tests are in test_ring.py and
test_data_parallel.py.
"""

from __future__ import annotations

import pytest
import torch

from minitorch_dist.comm import collective_bytes
from minitorch_dist.comm.cost import bus_bandwidth, collective_time
from minitorch_dist.data_parallel import build_buckets
from minitorch_dist.models import Llama, LlamaConfig

GB = 10**9


def psi(preset: str) -> int:
    return LlamaConfig.from_preset(preset).num_params()


def crossover(n: int, alpha: float, bandwidth: float) -> float:
    """The chapter's bisection: smallest size from which the ring all-reduce is faster."""
    lo, hi = 1.0, 1e12
    for _ in range(200):
        mid = (lo * hi) ** 0.5
        kw = dict(alpha=alpha, bandwidth=bandwidth)
        ring = collective_time("all_reduce", mid, n, algorithm="ring", **kw)
        rd = collective_time("all_reduce", mid, n, algorithm="recursive_doubling", **kw)
        lo, hi = (mid, hi) if ring > rd else (lo, mid)
    return hi


# -- chapter 5 --------------------------------------------------------------------------------
def test_chapter_ex1_llama3_8b_all_reduce_on_64_and_8_ranks() -> None:
    """2 (n - 1) / n * S for S = 2 psi: 63/32 S on 64 ranks, 7/4 S on 8 (ratio 9/8)."""
    S = 2 * psi("llama-3-8b")
    on_64, on_8 = collective_bytes("all_reduce", S, 64), collective_bytes("all_reduce", S, 8)
    assert on_64 == 63 * S // 32 and on_8 == 7 * S // 4
    assert on_64 / on_8 == pytest.approx(9 / 8)


def test_chapter_ex2_ring_beats_recursive_doubling_from_4_4_megabytes() -> None:
    """14 a + 14/8 S/B = 3 a + 3 S/B  =>  S = 11 a B / 1.25 = 4.4e6 bytes (a = 10 us, 50 GB/s)."""
    by_hand = 11 * 10e-6 * 50 * GB / (3 - 14 / 8)
    assert by_hand == pytest.approx(4.4e6)
    assert crossover(8, 10e-6, 50 * GB) == pytest.approx(by_hand, rel=1e-6)


def test_chapter_ex3_llama2_7b_buckets_of_25_mib() -> None:
    """Every 4096 x 4096 (and larger) fp32 matrix exceeds 25 MiB, and the small norm weights sit
    between them, so each of the 291 tensors is a bucket of its own."""
    with torch.device("meta"):
        model = Llama(LlamaConfig.from_preset("llama-2-7b"))
    order = list(model.parameters())[::-1]
    assert len(order) == 2 + 32 * 9 + 1  # embed, head; 9 per block (7 matrices, 2 norms); norm
    assert len(build_buckets(order, 25 * 2**20)) == len(order) == 291
    assert sum(1 for p in order if p.numel() * 4 > 25 * 2**20) == 2 + 32 * 7


def test_chapter_ex4_gradient_accumulation_steps() -> None:
    """gbs = mbs * grad_acc * dp: 2**22 tokens / (4096 * 1 * 64) = 16."""
    grad_acc = 2**22 // (4096 * 1 * 64)
    assert grad_acc == 16 and 1 * grad_acc * 64 * 4096 == 2**22


# -- lab 5 ------------------------------------------------------------------------------------
def test_lab_ex1_no_sync_saves_grad_acc_times_the_bytes() -> None:
    """One all-reduce of the 16-bit gradient per step with no_sync, eight without."""
    S = 2 * psi("llama-3-8b")
    with_no_sync = 2 * 63 * S // 64
    assert with_no_sync == collective_bytes("all_reduce", S, 64)
    assert 8 * with_no_sync == 8 * collective_bytes("all_reduce", S, 64)


def test_lab_ex2_latency_of_one_message_per_tensor() -> None:
    """21 tensors pay 21 * 14 alpha; one bucket pays 14 alpha; the bandwidth term is the same."""
    sizes = [p.numel() * 4 for p in Llama(LlamaConfig.from_preset("tiny")).parameters()]
    assert len(sizes) == 21 and sum(sizes) == 500_992
    a, bw = 20e-6, 25e9
    naive = sum(collective_time("all_reduce", s, 8, alpha=a, bandwidth=bw) for s in sizes)
    bucket = collective_time("all_reduce", sum(sizes), 8, alpha=a, bandwidth=bw)
    assert naive == pytest.approx(21 * 14 * a + 14 / 8 * sum(sizes) / bw)
    assert naive - bucket == pytest.approx(20 * 14 * a)


def test_lab_ex3_bus_bandwidth_of_a_1_gib_all_reduce() -> None:
    """algbw = 2**30 / 5 ms = 214.7 GB/s; busbw = 7/4 of it = 375.8 GB/s."""
    algbw = 2**30 / 5e-3 / GB
    assert round(algbw, 1) == 214.7
    assert round(bus_bandwidth("all_reduce", 2**30, 5e-3, 8) / GB, 1) == 375.8
