"""Context parallelism (lab 8: tasks lab08.1 - lab08.4).

Everything is compared with one process doing the same thing whole, in fp64: the merge with a
softmax over all keys, ring attention's output, lse and q/k/v gradients with full causal
``scaled_dot_product_attention`` (to 1e-10, cp = 2 and 4, both layouts, grouped-query heads),
the tiny Llama with cp = 2 with the single-process reference (:mod:`minitorch_dist.reference`).
Bytes counted by ``CommCounter`` equal the formulas of ``context_parallel.cost`` exactly; a work
counter reproduces the contiguous layout's 4r + 2 and the zig-zag's 2cp.

The tests of each task reach that task's code first: lab08.2's tests lay out their inputs with
the stored zig-zag half-chunks of tests/fixtures/zigzag.json (not lab08.4's layout) and merge
with lab08.1's ``merge_partials`` (a stub there is reported as "needs lab08.1 first": no test
computes the merge itself); lab08.3's tests call the backward with the output
and lse of full attention (not lab08.2's forward). Only the end-to-end tests need several:
``test_ring_attention_end_to_end`` (lab08.3) needs lab08.1-3, and the tiny Llama's tests need
lab08.1-3 (contiguous, graded lab08.3) and lab08.4 too (zig-zag, graded lab08.4).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from minitorch_dist import launch
from minitorch_dist.comm import CommCounter
from minitorch_dist.context_parallel import (
    WorkCounter,
    allgather_attention,
    allgather_bytes_per_rank,
    block_attention,
    causal_work,
    chunk_ids,
    merge_partials,
    ring_attention,
    ring_attention_backward,
    ring_attention_forward,
    ring_bytes_per_rank,
    shard_positions,
    shard_sequence,
    ulysses_attention,
    ulysses_bytes_per_rank,
    unshard_sequence,
    work_imbalance,
)
from minitorch_dist.context_parallel.compare import LayoutShard
from minitorch_dist.context_parallel.measure import count_cp_bytes, cp_runs, measure_attention
from minitorch_dist.memory import activation_bytes, llama_activation_breakdown
from minitorch_dist.models import LlamaConfig
from minitorch_dist.reference import assert_runs_match

TOL = {"rtol": 1e-10, "atol": 1e-10}  # fp64: only the order of additions differs
LAYOUTS = ["contiguous", "zigzag"]
CPS = [2, 4]


# -- helpers: stored values, or the student's own code --------------------------------------------
_ZIGZAG = json.loads((Path(__file__).parent / "fixtures" / "zigzag.json").read_text())


def _layout(x: torch.Tensor, rank: int, cp: int, layout: str, dim: int = 2) -> torch.Tensor:
    """This rank's shard, from the stored zig-zag half-chunks of each rank
    (tests/fixtures/zigzag.json): the tests of lab08.2/3 must not depend on lab08.4's
    shard_sequence, and the edition must not compute lab08.4's answer."""
    if layout == "contiguous":
        return x.chunk(cp, dim=dim)[rank].clone()
    pieces = x.chunk(2 * cp, dim=dim)
    return torch.cat([pieces[i] for i in _ZIGZAG[str(cp)][rank]], dim=dim)


def _inputs(seed: int = 0, b: int = 2, heads: int = 4, kv_heads: int = 2, s: int = 16, d: int = 8):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, heads, s, d, generator=gen, dtype=torch.float64)
    k = torch.randn(b, kv_heads, s, d, generator=gen, dtype=torch.float64)
    v = torch.randn(b, kv_heads, s, d, generator=gen, dtype=torch.float64)
    dout = torch.randn(b, heads, s, d, generator=gen, dtype=torch.float64)
    return q, k, v, dout


def _full(q, k, v, dout):  # noqa: ANN001, ANN202
    """Full causal attention (SDPA), its lse (written out), and the q/k/v gradients."""
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    out.backward(dout)
    groups = q.shape[1] // k.shape[1]
    scores = q.detach() @ k.detach().repeat_interleave(groups, 1).transpose(-2, -1)
    scores = scores / math.sqrt(q.shape[-1])
    s = q.shape[2]
    scores = scores.masked_fill(~torch.ones(s, s, dtype=torch.bool).tril(), float("-inf"))
    return out.detach(), torch.logsumexp(scores, -1), q.grad, k.grad, v.grad


# -- lab08.1: the online-softmax merge ----------------------------------------------------------
def _softmax_attention(q, k, v):  # noqa: ANN001, ANN202
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, -1) @ v, torch.logsumexp(scores, -1)


@pytest.mark.lab08
@pytest.mark.task("lab08.1")
def test_merge_of_two_parts_equals_softmax_over_all_keys():
    """lab08.1. Keys split 3 + 13 (unequal on purpose). Catches averaging the two outputs,
    adding them without rescaling, a max in place of log-sum-exp, and weights swapped."""
    q, k, v, _ = _inputs(1, heads=2, kv_heads=2)
    want_out, want_lse = _softmax_attention(q, k, v)
    a = block_attention(q, k[:, :, :3], v[:, :, :3])
    b = block_attention(q, k[:, :, 3:], v[:, :, 3:])
    for first, second in ((a, b), (b, a)):  # the merge is symmetric
        out, lse = merge_partials(*first, *second)
        assert not torch.allclose(out, first[0] + second[0], **TOL), (
            "the parts' outputs were added as they are: each must be rescaled by "
            "exp(lse_part - lse) before adding (its softmax was normalised over its keys only)"
        )
        torch.testing.assert_close(out, want_out, **TOL, msg=lambda m: f"merged output: {m}")
        torch.testing.assert_close(
            lse, want_lse, **TOL, msg=lambda m: f"merged lse = log(exp(lse_a) + exp(lse_b)): {m}"
        )


@pytest.mark.lab08
@pytest.mark.task("lab08.1")
def test_merge_folds_many_parts_in_any_order():
    """lab08.1. Four parts merged left to right and as a tree equal the whole softmax: the merge
    is associative. Catches a merge that is right for two equal halves only."""
    q, k, v, _ = _inputs(2, heads=2, kv_heads=2)
    want_out, want_lse = _softmax_attention(q, k, v)
    parts = [
        block_attention(q, k[:, :, i:j], v[:, :, i:j]) for i, j in ((0, 1), (1, 6), (6, 8), (8, 16))
    ]
    chain = parts[0]
    for p in parts[1:]:
        chain = merge_partials(*chain, *p)
    tree = merge_partials(
        *merge_partials(*parts[0], *parts[1]), *merge_partials(*parts[2], *parts[3])
    )
    for how, (out, lse) in (("left to right", chain), ("as a tree", tree)):
        torch.testing.assert_close(
            lse,
            want_lse,
            **TOL,
            msg=lambda m, how=how: (
                f"four parts merged {how}: the merged lse is not the "
                f"whole softmax's: {m}; it is logaddexp(lse_a, lse_b) (not the max, not a sum)"
            ),
        )
        torch.testing.assert_close(
            out,
            want_out,
            **TOL,
            msg=lambda m, how=how: (
                f"four parts merged {how}: the merged output is not the "
                f"whole softmax's: {m}; each part's output is weighted by exp(lse_part - lse) with "
                "lse = logaddexp(lse_a, lse_b)"
            ),
        )


@pytest.mark.lab08
@pytest.mark.task("lab08.1")
def test_merge_handles_rows_fully_masked_in_a_part():
    """lab08.1. A row that sees no key of part A (lse -inf, as a causal block gives the rows
    before its keys) must take part B unchanged; a row masked in both gives out 0, lse -inf.
    Catches NaN from exp(-inf - -inf)."""
    q, k, v, _ = _inputs(3, b=1, heads=1, kv_heads=1, s=6)
    mask_a = torch.zeros(6, 6, dtype=torch.bool)
    mask_a[3:, :3] = True  # rows 0-2 see nothing of part A
    out_a, lse_a = block_attention(q, k, v, mask=mask_a)
    out_b, lse_b = block_attention(q, k, v, mask=torch.ones(6, 6, dtype=torch.bool).tril())
    assert torch.isinf(lse_a[..., :3]).all() and (lse_a[..., :3] < 0).all()
    out, lse = merge_partials(out_a, lse_a, out_b, lse_b)
    assert not out.isnan().any() and not lse.isnan().any(), (
        "the merge gives NaN where a part saw no key (lse = -inf): exp(-inf - -inf) is NaN; "
        "take the max over finite values only, or give a fully masked part a weight of 0"
    )
    torch.testing.assert_close(
        out[..., :3, :],
        out_b[..., :3, :],
        **TOL,
        msg=lambda m: f"rows that see no key of part A must take part B's output as it is: {m}",
    )
    torch.testing.assert_close(
        lse[..., :3],
        lse_b[..., :3],
        **TOL,
        msg=lambda m: f"rows that see no key of part A must take part B's lse as it is: {m}",
    )
    none = torch.zeros(6, 6, dtype=torch.bool)
    out0, lse0 = merge_partials(
        *block_attention(q, k, v, mask=none), *block_attention(q, k, v, mask=none)
    )
    assert not out0.isnan().any() and (out0 == 0).all() and (lse0 == float("-inf")).all(), (
        f"rows masked in both parts give out {out0.flatten()[:3].tolist()}... and lse "
        f"{lse0.flatten()[:3].tolist()}..., not 0 and -inf: exp(-inf - -inf) is NaN where both "
        "lse are -inf; subtract a finite reference there (0), so both weights are 0"
    )


# -- lab08.2: ring attention, forward -------------------------------------------------------------
def _masked_everywhere(q, k, v, cp: int, layout: str) -> torch.Tensor:  # noqa: ANN001
    """The wrong answer of a ring that applies the causal mask to every block it computes:
    key j reaches query i only if its chunk is not later AND its place within its chunk is not
    later (chunks of s/cp tokens, or s/(2cp) in the zig-zag layout)."""
    s = q.shape[2]
    c = s // cp if layout == "contiguous" else s // (2 * cp)
    pos = torch.arange(s)
    mask = (pos[None] // c <= pos[:, None] // c) & (pos[None] % c <= pos[:, None] % c)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def _forward_rank(rank: int, cp: int, layout: str) -> dict:
    q, k, v, _ = _inputs()
    want_out, want_lse, *_ = _full(q, k, v, torch.zeros_like(q))
    wrong = _layout(_masked_everywhere(q, k, v, cp, layout), rank, cp, layout)
    mine = [_layout(t, rank, cp, layout) for t in (q, k, v)]
    with CommCounter() as cc:
        out, lse = ring_attention_forward(*mine, layout=layout, merge=merge_partials)
    return {
        "out": (out, _layout(want_out, rank, cp, layout)),
        "lse": (lse, _layout(want_lse, rank, cp, layout)),
        "masked everywhere": wrong,
        "bytes": cc.total_bytes_sent,
        "calls": dict(cc.calls),
        "peers": dict(cc.bytes_sent_to),
    }


@pytest.mark.lab08
@pytest.mark.task("lab08.2")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("cp", CPS)
def test_ring_forward_equals_full_causal_attention(cp, layout):
    """lab08.2. Each rank's output and lse are its shard of full causal attention (fp64, 4 query
    heads on 2 kv heads). Catches a block mask from the shard's local positions (every rank
    attending as if it were rank 0), K/V passed the wrong way round, a step missed."""
    for rank, res in enumerate(launch(_forward_rank, cp, layout)):
        ours, want = res["out"]
        assert torch.allclose(ours, want, **TOL) or not torch.allclose(
            ours, res["masked everywhere"], **TOL
        ), (
            f"rank {rank}: the causal mask on an off-diagonal block: only a diagonal block (a "
            "chunk's queries against its own keys) is causal; an earlier chunk's keys are seen "
            "whole"
        )
        for name in ("out", "lse"):
            ours, want = res[name]
            torch.testing.assert_close(
                ours,
                want,
                **TOL,
                msg=lambda m, r=rank, n=name: (
                    f"rank {r} {n} is not its shard of full causal attention: at step s rank r "
                    "holds the K/V of rank (r - s) mod cp (they travel to rank r + 1); compute "
                    "the blocks block_plan gives for that owner, merge every one, miss no step "
                    f"({m})"
                ),
            )


@pytest.mark.lab08
@pytest.mark.task("lab08.2")
@pytest.mark.parametrize("cp", CPS)
def test_ring_forward_sends_cp_minus_1_kv_blocks_to_the_next_rank(cp):
    """lab08.2. Bytes counted = ring_bytes_per_rank exactly, all of it to rank r + 1. Catches
    an all-gather (bytes to every rank), a send at the last step (cp blocks), K/V sent twice."""
    for rank, res in enumerate(launch(_forward_rank, cp, "zigzag")):
        want = ring_bytes_per_rank(2, 2, 16, 8, cp, bytes_per_element=8)
        assert res["bytes"] == want, (
            f"rank {rank} sent {res['bytes']} bytes, not cp - 1 = {cp - 1} K/V blocks ({want}): "
            "more means a send at the last step or K/V sent twice, an all-gather sends to every "
            "rank"
        )
        assert set(res["peers"]) == {(rank + 1) % cp}, (
            f"rank {rank} sent to ranks {sorted(res['peers'])}, not only to the next one, "
            f"{(rank + 1) % cp}: K/V travel one way round the ring"
        )


def _work_rank(rank: int, cp: int, layout: str) -> float:
    q, k, v, _ = _inputs(b=1, heads=1, kv_heads=1, s=4 * cp, d=4)
    with WorkCounter().attached() as work:  # books each plan the ring asks block_plan for
        ring_attention_forward(
            *(_layout(t, rank, cp, layout) for t in (q, k, v)), layout=layout, merge=merge_partials
        )
    return work.units


@pytest.mark.lab08
@pytest.mark.task("lab08.2")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_work_per_rank_contiguous_4r_plus_2_zigzag_even(layout):
    """lab08.2. Blocks computed per rank at cp = 8, in half-chunk units (a diagonal block 1/2):
    4r + 2 contiguous (max/mean 1.875), 2cp on every rank zig-zag. Catches a forward that
    computes every block and masks (2cp^2 units everywhere) or skips a needed one."""
    cp = 8
    units = launch(_work_rank, cp, layout, timeout=120)
    if layout == "contiguous":
        assert units == [4 * r + 2 for r in range(cp)]
        assert max(units) / (sum(units) / cp) == 1.875
    else:
        assert units == [2 * cp] * cp


def test_work_counter_books_plans_only_while_attached():
    """The counter is a hook on block_plan: attached, it books each plan (rank 1 against rank
    0's K/V, contiguous: one full block of 2 x 2 half-chunk units); detached, nothing more."""
    from minitorch_dist.context_parallel import block_plan

    work = WorkCounter()
    with work.attached():
        assert block_plan(1, 0, 2, "contiguous") == [(0, 0, "full")]
        block_plan(0, 1, 2, "contiguous")  # keys after the queries: skipped
    block_plan(1, 0, 2, "contiguous")  # detached: not booked
    assert (work.full, work.diagonal, work.skipped, work.units, work.per_step) == (
        1,
        0,
        1,
        4,
        [8, 0],
    )


# -- lab08.3: ring attention, backward ------------------------------------------------------------
def _backward_rank(rank: int, cp: int, layout: str) -> dict:
    q, k, v, dout = _inputs()
    out, lse, dq, dk, dv = _full(q, k, v, dout)
    sh = lambda t: _layout(t, rank, cp, layout)  # noqa: E731
    # this rank's own share of every dK/dV: the gradient from its queries alone
    mine = _layout(torch.arange(q.shape[2]), rank, cp, layout, dim=0)
    dout_mine = torch.zeros_like(dout).index_copy_(2, mine, dout.index_select(2, mine))
    *_, dk_mine, dv_mine = _full(q, k, v, dout_mine)
    with CommCounter() as cc:
        got = ring_attention_backward(
            sh(dout), sh(q), sh(k), sh(v), sh(out), sh(lse), layout=layout
        )
    return {
        "grads": list(zip(got, (sh(dq), sh(dk), sh(dv)))),
        "bytes": cc.total_bytes_sent,
        "own": {"dk": sh(dk_mine), "dv": sh(dv_mine)},
        "peers": dict(cc.bytes_sent_to),
    }


@pytest.mark.lab08
@pytest.mark.task("lab08.3")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("cp", CPS)
def test_ring_backward_equals_full_attention_gradients(cp, layout):
    """lab08.3. dq, dk, dv of each rank's shard equal the shards of full attention's gradients
    (given the true output and lse). Catches dK/dV left with the rank that computed them
    instead of returned to the owner, a missing hop, dK/dV of the other kv-head grouping."""
    rule = (
        "the gradient of this rank's K/V block is its own share plus every other rank's, "
        "which travel the ring back to it"
    )
    for rank, res in enumerate(launch(_backward_rank, cp, layout)):
        for name, (ours, want) in zip(("dq", "dk", "dv"), res["grads"]):
            if name != "dq" and not torch.allclose(ours, want, **TOL):
                own = res["own"][name]
                assert not torch.allclose(ours, own, **TOL), (
                    f"rank {rank} {name} holds only its own share: the other ranks' shares "
                    f"never came back round the ring ({rule})"
                )
                assert not torch.allclose(ours, want - own, **TOL), (
                    f"rank {rank} {name} holds the other ranks' shares only: the buffer that came "
                    f"back replaced this rank's own share instead of being added to it ({rule})"
                )
            hint = "" if name == "dq" else f" ({rule})"
            torch.testing.assert_close(
                ours, want, **TOL, msg=lambda m, r=rank, n=name, h=hint: f"rank {r} {n}{h}: {m}"
            )


@pytest.mark.lab08
@pytest.mark.task("lab08.3")
@pytest.mark.parametrize("cp", CPS)
def test_ring_backward_sends_twice_the_forward(cp):
    """lab08.3. K/V again and their gradients: 2 (cp - 1) blocks, all to rank r + 1. Catches
    gradients sent back against the ring, or a dK/dV buffer that makes cp hops."""
    for rank, res in enumerate(launch(_backward_rank, cp, "zigzag")):
        want = ring_bytes_per_rank(2, 2, 16, 8, cp, bytes_per_element=8, backward=True)
        assert res["bytes"] == want
        assert set(res["peers"]) == {(rank + 1) % cp}


def _end_to_end_rank(rank: int, cp: int, layout: str) -> list:
    q, k, v, dout = _inputs()
    out, _, dq, dk, dv = _full(q, k, v, dout)
    sh = lambda t: _layout(t, rank, cp, layout)  # noqa: E731
    mine = [sh(t).requires_grad_() for t in (q, k, v)]
    ours = ring_attention(*mine, layout=layout)
    ours.backward(sh(dout))
    return [(ours.detach(), sh(out))] + [(t.grad, sh(g)) for t, g in zip(mine, (dq, dk, dv))]


@pytest.mark.lab08
@pytest.mark.task("lab08.3")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("cp", CPS)
def test_ring_attention_end_to_end(cp, layout):
    """lab08.3 (with lab08.1 and lab08.2). The autograd Function: output and q/k/v gradients
    through ``.backward`` equal full causal SDPA's shards to 1e-10."""
    for rank, pairs in enumerate(launch(_end_to_end_rank, cp, layout)):
        for name, (ours, want) in zip(("out", "dq", "dk", "dv"), pairs):
            torch.testing.assert_close(
                ours, want, **TOL, msg=lambda m, r=rank, n=name: f"rank {r} {n}: {m}"
            )


@pytest.mark.lab08
@pytest.mark.task("lab08.3")
def test_tiny_llama_contiguous_cp2_equals_the_reference():
    """lab08.3. The tiny Llama, 3 AdamW steps with cp = 2 (contiguous): losses, every rank's
    logits, every gradient and the weights equal the single process's (fp64)."""
    runs, ref = cp_runs(2, layout="contiguous")
    assert_runs_match(runs, ref, outputs=lambda r: LayoutShard(r, 2, "contiguous"))


# -- lab08.4: the zig-zag layout and its positions -----------------------------------------------
@pytest.mark.lab08
@pytest.mark.task("lab08.4")
@pytest.mark.parametrize("cp", [1, 2, 4])
def test_zigzag_shard_holds_half_chunks_r_and_2cp_minus_1_minus_r(cp):
    """lab08.4. On tokens 0..s-1 rank r holds half-chunks r then 2cp-1-r, and its positions are
    those tokens. Catches the halves in the wrong order, the contiguous layout, positions
    0..s/cp-1 (the shard's own places)."""
    s = 8 * cp
    tokens = torch.arange(s).view(1, s) * 10
    shards = []
    for r in range(cp):
        mine = shard_sequence(tokens, r, cp, layout="zigzag", dim=1)
        want = _layout(tokens, r, cp, "zigzag", dim=1)
        held = (mine[0] // 10 // (s // (2 * cp))).unique_consecutive().tolist()
        assert torch.equal(mine, want), (
            f"rank {r} holds half-chunks {held}, not r and 2cp - 1 - r = {[r, 2 * cp - 1 - r]}: "
            f"{mine.tolist()}"
        )
        positions = shard_positions(s, r, cp, layout="zigzag")
        contiguous = torch.equal(positions, torch.arange(s).chunk(cp)[r])
        local = torch.equal(positions, torch.arange(s // cp))
        hint = (
            ": the contiguous layout's; a token keeps its place in the whole sequence (half-chunks"
            " r and 2cp - 1 - r)"
            if contiguous
            else ""
        )
        if local:  # on rank 0 the contiguous layout's too
            hint += (", " if hint else ": ") + "not the shard's own places 0..s/cp - 1"
        assert torch.equal(positions, want[0] // 10), (
            f"rank {r}'s positions {positions.tolist()}{hint}"
        )
        shards.append(mine)
    assert torch.equal(unshard_sequence(shards, layout="zigzag", dim=1), tokens)


@pytest.mark.lab08
@pytest.mark.drawn_per_run
@pytest.mark.task("lab08.4")
def test_zigzag_at_a_cp_not_stored():
    """lab08.4. Catches a table of tests/fixtures/zigzag.json (cp = 1, 2, 4, 8): at a cp drawn
    for this run that the fixture does not hold, rank r's shard and positions are the tokens of
    half-chunks r and 2cp - 1 - r, in that order."""
    cp = random.choice([3, 5, 6, 7])
    half = random.randrange(1, 5)
    s = 2 * cp * half
    tokens = torch.arange(s).view(1, s)
    for r in range(cp):
        mine = shard_sequence(tokens, r, cp, layout="zigzag", dim=1)[0].tolist()
        positions = shard_positions(s, r, cp, layout="zigzag").tolist()
        first, last = (
            list(range(r * half, (r + 1) * half)),
            list(range((2 * cp - 1 - r) * half, (2 * cp - r) * half)),
        )
        assert mine == first + last, (
            f"cp = {cp}, s = {s} (drawn for this run, not stored): rank {r} holds tokens {mine}, "
            f"not half-chunks r = {r} and 2cp - 1 - r = {2 * cp - 1 - r} ({first + last}); "
            "compute them from r and cp, not from the stored cases"
        )
        assert positions == first + last, (
            f"cp = {cp}, s = {s} (drawn for this run, not stored): rank {r}'s positions "
            f"{positions}, not its tokens' places in the whole sequence {first + last}"
        )


@pytest.mark.lab08
@pytest.mark.task("lab08.4")
def test_tiny_llama_zigzag_cp2_equals_the_reference():
    """lab08.4 (with lab08.1-3). The zig-zag tiny Llama with cp = 2 equals the reference:
    catches RoPE rotated by the shard's own positions or labels not permuted with the tokens."""
    runs, ref = cp_runs(2, layout="zigzag")
    assert_runs_match(runs, ref, outputs=lambda r: LayoutShard(r, 2, "zigzag"))


# -- not graded: formulas, bad input, the alternatives, memory -----------------------------------
def test_causal_work_and_imbalance_formulas():
    """Catches a work count that forgets the diagonal (4r + 1) or counts it whole (4r + 3)."""
    assert [causal_work(r, 8, layout="contiguous") for r in range(8)] == [
        4 * r + 2 for r in range(8)
    ]
    assert [causal_work(r, 8, layout="zigzag") for r in range(8)] == [16] * 8
    assert work_imbalance(8, layout="contiguous") == 1.875
    assert work_imbalance(8, layout="zigzag") == 1.0
    assert chunk_ids(1, 4, layout="zigzag") == [1, 6] and chunk_ids(1, 4, layout="contiguous") == [
        2,
        3,
    ]


def test_bytes_formulas():
    """(cp - 1) K/V blocks forward, twice that backward; all-gather the ring's forward bytes each
    way; Ulysses (cp - 1)/cp of q, k, v and the output."""
    block = 2 * 1 * 8 * (4096 // 4) * 128 * 2  # 2 b KV (s/cp) d p
    assert ring_bytes_per_rank(1, 8, 4096, 128, 4) == 3 * block
    assert ring_bytes_per_rank(1, 8, 4096, 128, 4, backward=True) == 6 * block
    assert allgather_bytes_per_rank(1, 8, 4096, 128, 4, backward=True) == 3 * block
    assert ulysses_bytes_per_rank(1, 32, 8, 4096, 128, 4) == 3 * (4 * block + block) // 4


def test_bad_input_is_a_value_error_naming_the_constraint():
    x = torch.zeros(1, 1, 12, 2)
    with pytest.raises(ValueError, match=r"seq=12 is not divisible by 2\*cp=8"):
        shard_sequence(x, 0, 4, layout="zigzag")
    with pytest.raises(ValueError, match=r"seq=12 is not divisible by cp=5"):
        shard_sequence(x, 0, 5, layout="contiguous")
    with pytest.raises(ValueError, match="layout must be one of"):
        shard_sequence(x, 0, 2, layout="striped")
    with pytest.raises(ValueError, match=r"heads=6 is not divisible by cp=4"):
        ulysses_bytes_per_rank(1, 6, 2, 64, 8, 4)
    with pytest.raises(ValueError, match=r"seq_len=10 is not divisible by cp=4"):
        activation_bytes(seq_len=10, micro_batch=1, hidden=8, heads=2, cp=4)


def _ulysses_bad_heads(rank: int, cp: int) -> str:
    q = torch.zeros(1, 6, 4, 2)
    try:
        ulysses_attention(q, q[:, :2], q[:, :2])
    except ValueError as e:
        return str(e)
    return "no error"


def test_ulysses_refuses_heads_not_divisible_by_cp():
    assert launch(_ulysses_bad_heads, 4) == ["heads=6 is not divisible by cp=4"] * 4


def _alternative_rank(rank: int, cp: int, layout: str, method: str) -> list:
    attention = {"allgather": allgather_attention, "ulysses": ulysses_attention}[method]
    q, k, v, dout = _inputs()
    out, _, dq, dk, dv = _full(q, k, v, dout)
    mine = [shard_sequence(t, rank, cp, layout=layout).requires_grad_() for t in (q, k, v)]
    ours = attention(*mine, layout=layout)
    ours.backward(shard_sequence(dout, rank, cp, layout=layout))
    sh = lambda t: shard_sequence(t, rank, cp, layout=layout)  # noqa: E731
    return [(ours.detach(), sh(out))] + [(t.grad, sh(g)) for t, g in zip(mine, (dq, dk, dv))]


@pytest.mark.parametrize("method", ["allgather", "ulysses"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_alternatives_equal_full_causal_attention(method, layout):
    """All-gather K/V and Ulysses (cp = 2) give the same output and gradients as full SDPA."""
    for pairs in launch(_alternative_rank, 2, layout, method):
        for ours, want in pairs:
            torch.testing.assert_close(ours, want, **TOL)


@pytest.mark.parametrize("method", ["ring", "allgather", "ulysses"])
def test_counted_bytes_equal_the_formulas(method):
    """CommCounter's bytes of one call, forward and backward, = the formula, on every rank."""
    res = count_cp_bytes(4, method=method, kv_heads=4)
    for rank in res["per_rank"]:
        assert rank["forward"] == res["formula"]["forward"]
        assert rank["backward"] == res["formula"]["backward"]


def test_ring_keeps_less_than_allgather():
    """Per rank, ring attention keeps less for backward and peaks lower than all-gather K/V
    (measured by the memory tracker, cp = 4): the all-gather stores all s keys and values."""
    ring = measure_attention(4, method="ring", seq=128, head_dim=32)
    gathered = measure_attention(4, method="allgather", seq=128, head_dim=32)
    for r, a in zip(ring, gathered):
        assert r["saved_bytes"] < a["saved_bytes"]
        assert r["peak_bytes"] <= a["peak_bytes"]


def test_activation_estimates_divide_by_cp_and_keep_their_defaults():
    """cp=1 changes nothing (chapters 1-7 call without it); cp divides every term."""
    kw = dict(seq_len=4096, micro_batch=1, hidden=4096, heads=32, layers=32)
    assert activation_bytes(**kw) == activation_bytes(**kw, cp=1)
    assert activation_bytes(**kw, cp=8) * 8 == activation_bytes(**kw)
    assert activation_bytes(**kw, tp=8, sp=True, cp=4) * 4 == activation_bytes(**kw, tp=8, sp=True)
    cfg = LlamaConfig.from_preset("llama-3-8b")
    assert llama_activation_breakdown(cfg, seq_len=8192, micro_batch=1, cp=4) == (
        llama_activation_breakdown(cfg, seq_len=2048, micro_batch=1)
    )
