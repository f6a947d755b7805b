"""The answers to the exercises of chapter 12 (choosing a configuration) and of lab 12,
recomputed through the package and by hand.

By hand: ZeRO-1 keeps 12 bytes per parameter of a 1/dp shard (Rajbhandari et al. 2020, sections
3.1 and 5); the 1F1B bubble is (p - 1)/m of the work and (p - 1)/(v m) interleaved (Narayanan et
al. 2021, section 2.2). A change in the package that would silently change a published answer
fails here. Not graded (no ``lab12`` marker).
"""

from __future__ import annotations

from minitorch_dist.pipeline import bubble_fraction
from minitorch_dist.planner import Cluster, ParallelConfig, as_model, plan, rank_memory, step_time

L70 = as_model("llama-3-70b")
PSI_STAGE0 = 2_271_543_296  # Llama 3 70B, tp=8, pp=4, stage 0: 20 blocks + the embedding slice


def test_stage0_parameters():
    assert L70.llama.num_params_per_rank(tp=8, pp=4) == PSI_STAGE0
    block = (2 * 8192 * 8192 + 3 * 8192 * 28672) // 8 + 2 * 8192 * 128 + 2 * 8192
    assert PSI_STAGE0 == 20 * block + 129024 * 8192 // 8  # vocabulary padded to 126 x 1024


def test_chapter_ex1_and_lab_ex1_optimizer_bytes():
    """12 bytes of a 1/32 (chapter) or 1/2 (lab) shard; 12 of every parameter without ZeRO."""
    for dp, batch in ((32, 1024), (2, 256)):
        got = rank_memory(
            L70, ParallelConfig(dp=dp, tp=8, pp=4, zero=1), seq_len=4096, global_batch=batch
        )["optimizer"]
        assert got == 12 * -(-PSI_STAGE0 // dp)
    assert 12 * -(-PSI_STAGE0 // 32) == 851_828_736


def test_chapter_ex2_and_lab_ex2_bubble():
    assert bubble_fraction(4, 1024 // 32) == 3 / 32
    assert bubble_fraction(4, 32, 4) == 3 / 128
    assert bubble_fraction(4, 128) == 3 / 128 and bubble_fraction(4, 128, 2) == 3 / 256


def test_chapter_ex3_slower_ports_cost_the_old_choice_more():
    """The planner's choice on the real network is slower on a network four times slower, and
    the new choice is no slower there than the old one."""
    kw = {"global_batch": 1024, "seq_len": 4096}
    fast = Cluster.from_preset("dgx-h100", 1024)
    slow = Cluster.from_preset("dgx-h100", 1024, nic_bandwidth=fast.nic_bandwidth / 4)
    best = plan(L70, fast, **kw).fitting[0]
    slow_best = plan(L70, slow, **kw).fitting[0]
    assert step_time(L70, slow, best.config, **kw).total > best.time.total
    assert slow_best.time.total <= step_time(L70, slow, best.config, **kw).total
