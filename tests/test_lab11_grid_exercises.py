"""The answers to the exercises of lab 11 and of chapter 11, recomputed.

Each answer is computed twice: by the package (what the lab's and the page's cells check
against) and by hand from the tiny Llama's shape and the grid's numbering (tp innermost:
rank = ((dp_i p + pp_i) c + cp_i) t + tp_i), so a change in the package that would silently
change a published answer fails here. Not graded (no ``lab11`` marker): the graded tests of the
code these answers use are in test_lab11_grid.py.
"""

from __future__ import annotations

import math

from minitorch_dist.grid import GridLayout
from minitorch_dist.models import LlamaConfig

TINY = LlamaConfig.from_preset("tiny")


def _rank5_by_hand() -> int:
    """Rank 5 of dp x pp x tp = 2 x 2 x 2 is (dp 1, pp 0, tp 1): the embedding's half of the
    vocabulary, block 0 with every matrix cut in two and its two norms whole."""
    V, h, f = TINY.vocab_size, TINY.hidden, TINY.ffn_hidden
    kv = TINY.kv_heads * (h // TINY.heads)
    attention = (h * h + 2 * h * kv + h * h) // 2  # wq, wk, wv, wo
    mlp = 3 * h * f // 2  # w1, w3, w2
    return V * h // 2 + 2 * h + attention + mlp


def test_lab_ex1_and_chapter_ex1_rank5_parameters_and_zero_shard():
    layout = GridLayout(dp=2, pp=2, tp=2)
    assert layout.coords(5) == {"dp": 1, "pp": 0, "cp": 0, "ep": 0, "tp": 1}
    assert _rank5_by_hand() == TINY.num_params_per_rank(tp=2, pp=2, stage=0) == 31_360
    assert math.ceil(_rank5_by_hand() / 2) == 15_680  # ZeRO-1 over the dp group of 2


def test_lab_ex2_llama3_405b_groups_span_1_16_128_nodes():
    """t = 8, p = 16, d = 128 (Dubey et al. 2024, Table 4); 8 GPUs per node. tp: ranks 0-7;
    pp: stride t = 8 (16 nodes); dp: stride p t = 128 (128 nodes)."""
    big = GridLayout(dp=128, pp=16, tp=8)
    assert big.group_ranks("tp", 0) == list(range(8))
    assert big.group_ranks("pp", 0) == list(range(0, 128, 8))
    assert big.group_ranks("dp", 0) == list(range(0, 16_384, 128))
    nodes = {a: len({r // 8 for r in big.group_ranks(a, 0)}) for a in ("tp", "pp", "dp")}
    assert nodes == {"tp": 1, "pp": 16, "dp": 128}


def test_chapter_ex2_long_context_cp_group_spans_16_nodes():
    """t = 8, c = 16, p = 16, d = 8: cp has stride t = 8, so its 16 ranks sit on 16 nodes;
    ZeRO reduces over dp x cp = 128 ranks."""
    long = GridLayout(dp=8, pp=16, cp=16, tp=8)
    assert long.group_ranks("cp", 0) == list(range(0, 128, 8))
    assert len({r // 8 for r in long.group_ranks("cp", 0)}) == 16
    assert len(long.group_ranks("dp_cp", 0)) == 8 * 16
