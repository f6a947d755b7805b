"""The model, ready to be cut: Attention on a tensor-parallel slice of whole heads, and pipeline
stages (``split_model``) that chain to exactly ``Llama.forward``. Single process, fp64. Each
docstring names the bug the test catches."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from minitorch_dist.models import Attention, LlamaConfig, rope_tables

TINY = LlamaConfig.from_preset("tiny")  # 2 blocks, 4 heads sharing 2 kv heads
# 4 blocks (for uneven 3-stage splits), 8 query heads sharing 4 kv heads
DEEP = LlamaConfig("deep-gqa", 100, 64, 4, 8, 4, 96, 64, 1e-5, 10000.0)


def _rows(linear: nn.Linear, part: slice) -> nn.Linear:
    """A column-parallel shard: the output features ``part`` of ``linear`` (rows of W)."""
    shard = nn.Linear(linear.in_features, part.stop - part.start, bias=False, dtype=torch.float64)
    shard.weight.data.copy_(linear.weight[part])
    return shard


def _cols(linear: nn.Linear, part: slice) -> nn.Linear:
    """A row-parallel shard: the input features ``part`` of ``linear`` (columns of W)."""
    shard = nn.Linear(part.stop - part.start, linear.out_features, bias=False, dtype=torch.float64)
    shard.weight.data.copy_(linear.weight[:, part])
    return shard


def _tp_shard(full: Attention, rank: int, tp: int) -> Attention:
    """Rank ``rank``'s share of ``full`` under Megatron tensor parallelism, made as a tp transform
    would: a copy of ``full`` (its heads, kv_heads untouched) whose wq, wk, wv keep the output
    rows of heads [rank*H/tp, (rank+1)*H/tp) and kv heads [rank*KV/tp, ...), and wo the matching
    input columns."""
    d = full.head_dim
    q_part = slice(rank * full.heads // tp * d, (rank + 1) * full.heads // tp * d)
    kv_part = slice(rank * full.kv_heads // tp * d, (rank + 1) * full.kv_heads // tp * d)
    shard = copy.deepcopy(full)
    shard.wq, shard.wk, shard.wv = (
        _rows(full.wq, q_part),
        _rows(full.wk, kv_part),
        _rows(full.wv, kv_part),
    )
    shard.wo = _cols(full.wo, q_part)
    return shard


@pytest.mark.parametrize("cfg", [TINY, DEEP], ids=lambda c: c.name)
def test_attention_on_a_slice_of_whole_heads_sums_to_the_full_attention(cfg) -> None:
    """Catches Attention reshaping with its configured head count (view(b, s, H, d) fails or
    mixes heads on a 1/tp slice) or a slice pairing query heads with the wrong kv head: on tp=2
    ranks holding whole heads, the outputs of the row-parallel wo sum to the full output."""
    tp = 2
    assert cfg.kv_heads % tp == 0
    torch.manual_seed(0)
    full = Attention(cfg).double()
    x = torch.randn(2, 11, cfg.hidden, dtype=torch.float64)
    cos, sin = (t.double() for t in rope_tables(11, cfg.head_dim, cfg.rope_theta))
    shards = [_tp_shard(full, r, tp) for r in range(tp)]
    summed = sum(shard(x, cos, sin) for shard in shards)
    torch.testing.assert_close(summed, full(x, cos, sin), rtol=1e-12, atol=1e-12)
