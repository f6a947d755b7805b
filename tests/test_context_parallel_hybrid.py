"""Hybrid context parallelism (USP, Megatron-LM's ``a2a+p2p``): Ulysses over u ranks, the ring
over r, on 4 emulated ranks (u = r = 2), against full causal attention in fp64, bytes counted
against ``hybrid_cp_bytes``. The shards over all c = u r ranks are cut by the package's
``shard_sequence`` (lab08.4's zig-zag: an edition ships no second copy of it)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from minitorch_dist import launch
from minitorch_dist.comm import CommCounter
from minitorch_dist.context_parallel import (
    hybrid_attention,
    hybrid_cp_bytes,
    hybrid_groups,
    hybrid_order,
    ring_bytes_per_rank,
    shard_sequence,
    ulysses_bytes_per_rank,
)

TOL = {"rtol": 1e-12, "atol": 1e-12}
LAYOUTS = ["contiguous", "zigzag"]


def _layout(x: torch.Tensor, rank: int, cp: int, layout: str, dim: int = 2) -> torch.Tensor:
    """This rank's shard under ``layout``: the package's own ``shard_sequence`` (lab08.4)."""
    return shard_sequence(x, rank, cp, layout=layout, dim=dim)


def _inputs(heads: int = 4, kv_heads: int = 2, s: int = 32, d: int = 8, b: int = 2):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(b, heads, s, d, generator=gen, dtype=torch.float64)
    k = torch.randn(b, kv_heads, s, d, generator=gen, dtype=torch.float64)
    v = torch.randn(b, kv_heads, s, d, generator=gen, dtype=torch.float64)
    dout = torch.randn(b, heads, s, d, generator=gen, dtype=torch.float64)
    return q, k, v, dout


def _hybrid_rank(rank: int, cp: int, u: int, layout: str, kv_heads: int = 2) -> dict:
    q, k, v, dout = _inputs(kv_heads=kv_heads)
    full = [t.clone().requires_grad_() for t in (q, k, v)]
    want = F.scaled_dot_product_attention(*full, is_causal=True, enable_gqa=True)
    want.backward(dout)
    sh = lambda t: _layout(t, rank, cp, layout)  # noqa: E731
    groups = hybrid_groups(u, cp // u)
    mine = [sh(t).requires_grad_() for t in (q, k, v)]
    with CommCounter() as fwd:
        out = hybrid_attention(*mine, groups=groups, layout=layout)
    with CommCounter() as bwd:
        out.backward(sh(dout))
    pairs = [(out.detach(), sh(want.detach()))]
    pairs += [(t.grad, sh(f.grad)) for t, f in zip(mine, full)]
    return {
        "pairs": pairs,
        "fwd": fwd.total_bytes_sent,
        "bwd": bwd.total_bytes_sent,
        "ops": sorted({c.op for c in fwd.log}),
    }


@pytest.mark.parametrize("layout", LAYOUTS)
def test_hybrid_2x2_equals_full_causal_attention_forward_and_backward(layout):
    """Output and dq/dk/dv shards equal full causal SDPA's (fp64, 1e-12, GQA 4 on 2 heads).
    Catches the zig-zag's second halves gathered in rank order (the ring then masks the wrong
    blocks), heads scattered to the wrong rank, and dk/dv not returned through the all-to-all."""
    for rank, res in enumerate(launch(_hybrid_rank, 4, 2, layout)):
        for name, (ours, want) in zip(("out", "dq", "dk", "dv"), res["pairs"]):
            torch.testing.assert_close(
                ours, want, **TOL, msg=lambda m, r=rank, n=name: f"rank {r} {n}: {m}"
            )


@pytest.mark.parametrize("u", [1, 2, 4])
def test_hybrid_degenerates_to_ring_and_to_ulysses(u):
    """u = 1 is the ring over 4 ranks, u = 4 Ulysses over 4 ranks: still exact. Catches a
    grouping that only works when both axes are larger than one."""
    for res in launch(_hybrid_rank, 4, u, "zigzag", max(u, 2)):  # kv heads divisible by u
        for ours, want in res["pairs"]:
            torch.testing.assert_close(ours, want, **TOL)


@pytest.mark.parametrize("u", [1, 2, 4])
def test_hybrid_bytes_counted_equal_the_closed_form(u):
    """CommCounter's bytes, forward and backward, = hybrid_cp_bytes exactly on every rank, and
    the forward uses all-to-alls and p2p only. Catches an all-to-all over all c ranks (u - 1 /
    u of the wrong group), the ring run on all heads instead of KV/u."""
    r = 4 // u
    kv = max(u, 2)
    kw = dict(batch=2, heads=4, kv_heads=kv, seq=32, head_dim=8, u=u, r=r, bytes_per_element=8)
    for res in launch(_hybrid_rank, 4, u, "zigzag", kv):
        assert res["fwd"] == hybrid_cp_bytes(**kw)
        assert res["bwd"] == hybrid_cp_bytes(**kw, backward=True)
        assert set(res["ops"]) <= {"all_to_all", "send", "recv"}


def test_hybrid_closed_form_is_ulysses_plus_ring():
    """The hybrid's bytes are Ulysses' on s/r over u plus the ring's on KV/u heads over r, and
    reduce to either at u = c or r = c. Catches a ring term on all KV heads."""
    kw = dict(batch=1, heads=32, kv_heads=8, seq=131072, head_dim=128)
    for bwd in (False, True):
        assert hybrid_cp_bytes(**kw, u=8, r=1, backward=bwd) == ulysses_bytes_per_rank(
            **kw, cp=8, backward=bwd
        )
        assert hybrid_cp_bytes(**kw, u=1, r=8, backward=bwd) == ring_bytes_per_rank(
            1, 8, 131072, 128, 8, backward=bwd
        )
    block = 2 * 1 * (8 // 2) * (131072 // 4) * 128 * 2  # one ring block: 2 b (KV/u) (s/r) d p
    a2a = (2 - 1) * 1 * (131072 // 8) * 128 * 2 * (2 * 32 + 2 * 8) // 2
    assert hybrid_cp_bytes(**kw, u=2, r=4) == a2a + 3 * block


def test_hybrid_order_puts_the_zigzag_halves_back():
    """u = 2, 2 tokens per rank: gathered [F0, S0, F1, S1] -> [F0, F1, S1, S0]. Catches the
    second halves kept in rank order."""
    assert hybrid_order(2, 2, "zigzag").tolist() == [0, 2, 3, 1]
    assert hybrid_order(2, 2, "contiguous").tolist() == [0, 1, 2, 3]


def _bad_heads(rank: int, cp: int, heads: int, kv_heads: int) -> str:
    groups = hybrid_groups(2, 2)
    q = torch.zeros(1, heads, 4, 2)
    try:
        hybrid_attention(q, q[:, :kv_heads], q[:, :kv_heads], groups=groups)
    except ValueError as e:
        return str(e)
    return "no error"


def test_hybrid_refuses_heads_not_divisible_by_u():
    """Three heads (or one kv head) over u = 2 Ulysses ranks: a ValueError naming u, on every
    rank, not a hang in the all-to-all. Catches a check against c or r instead of u."""
    assert launch(_bad_heads, 4, 3, 1) == ["heads=3 is not divisible by u=2"] * 4
    assert launch(_bad_heads, 4, 2, 1) == ["kv_heads=1 is not divisible by u=2"] * 4
    with pytest.raises(ValueError, match=r"heads=6 is not divisible by u=4"):
        hybrid_cp_bytes(1, 6, 2, 64, 8, 4, 1)
    with pytest.raises(ValueError, match=r"kv_heads=2 is not divisible by u=4"):
        hybrid_cp_bytes(1, 8, 2, 64, 8, 4, 1)
