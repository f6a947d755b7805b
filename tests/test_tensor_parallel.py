"""Tensor and sequence parallelism (lab 7: tasks lab07.1 - lab07.5).

Every shard is cut from the full master weight, so each test compares with one process doing
the same thing whole: the region-crossing Functions against the sums they stand for, the
parallel linears and the vocabulary-parallel pieces against ``nn.Linear``, ``nn.Embedding`` and
``F.cross_entropy``, and the tiny Llama against itself through :mod:`minitorch_dist.reference`
(outputs, every shard's gradient, weights after 3 AdamW steps; fp64, exact to 1e-12) on t = 2
and 4. Bytes counted by ``CommCounter`` equal ``tp_comm_bytes`` exactly; stored activations
measured by the memory tracker equal ``tp_activation_bytes`` exactly. Each test's docstring names
the wrong answer it catches.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from minitorch_dist import launch
from minitorch_dist.comm import CommCounter, collective_bytes
from minitorch_dist.models import LlamaConfig
from minitorch_dist.tensor_parallel import (
    ColumnParallelLinear,
    RowParallelLinear,
    VocabParallelEmbedding,
    compare_with_reference,
    copy_to_tp,
    count_tp_bytes,
    gather_from_sp,
    measure_tp_activations,
    padded_vocab_size,
    reduce_from_tp,
    reduce_scatter_to_sp,
    scatter_to_sp,
    tp_comm_bytes,
    tp_generators,
    vocab_parallel_cross_entropy,
    vocab_parallel_head,
)

EXACT = 1e-12  # fp64: only the order of additions differs
W = dist.group.WORLD
# kv_heads = 4: at t = 4 each rank keeps its own kv head (the tiny preset, 2 kv heads, makes
# copies); vocabulary 250 with multiple 8: padded to 256 at t = 2 and 4, the last rank part padding
MHA = LlamaConfig("tiny-mha", 256, 64, 2, 4, 4, 176, 256, 1e-5, 10000.0)
ODD = LlamaConfig("tiny-odd", 250, 64, 2, 4, 2, 176, 256, 1e-5, 10000.0)


def _worst(comparisons: list) -> tuple[float, str]:
    worst = max(comparisons, key=lambda c: c.max_abs_error)
    return worst.max_abs_error, worst.worst


# -- lab07.1: f and g ---------------------------------------------------------------------------
def _f_and_g(rank: int, world_size: int) -> dict:
    x = torch.arange(6.0, dtype=torch.float64).view(2, 3).requires_grad_()
    with CommCounter() as forward:
        y = copy_to_tp(x, W)
    with CommCounter() as backward:
        y.backward(torch.full_like(y, rank + 1.0))  # each rank a different partial gradient
    p = torch.full((2, 3), rank + 1.0, dtype=torch.float64, requires_grad=True)
    with CommCounter() as g_forward:
        z = reduce_from_tp(p, W)
    with CommCounter() as g_backward:
        z.backward(torch.ones_like(z) * 3)
    return {
        "y": y.detach(),
        "x_grad": x.grad,
        "f_calls": (forward.calls, backward.calls),
        "z": z.detach(),
        "p_grad": p.grad,
        "g_calls": (g_forward.calls, g_backward.calls),
    }


@pytest.mark.lab07
@pytest.mark.task("lab07.1")
@pytest.mark.parametrize("tp", [2, 4])
def test_f_identity_forward_all_reduce_backward_and_g_the_reverse(tp):
    """Catches f's backward without the all-reduce (x.grad = this rank's part only), g's forward
    without it, and g's backward all-reducing too (the gradient t times too large)."""
    total = sum(range(1, tp + 1))
    for rank, out in enumerate(launch(_f_and_g, tp)):
        x = torch.arange(6.0, dtype=torch.float64).view(2, 3)
        torch.testing.assert_close(
            out["y"], x, rtol=0, atol=0, msg=f"rank {rank}: f's forward must be the identity"
        )
        torch.testing.assert_close(
            out["x_grad"],
            torch.full((2, 3), float(total), dtype=x.dtype),
            msg=f"rank {rank}: f's backward must all-reduce (sum) the ranks' partial gradients",
        )
        torch.testing.assert_close(
            out["z"],
            torch.full((2, 3), float(total), dtype=x.dtype),
            msg=f"rank {rank}: g's forward must all-reduce (sum) the ranks' partial outputs",
        )
        torch.testing.assert_close(
            out["p_grad"],
            torch.full((2, 3), 3.0, dtype=x.dtype),
            msg=f"rank {rank}: g's backward must be the identity (no all-reduce)",
        )
        assert out["f_calls"] == ({}, {"all_reduce": 1}), f"rank {rank}: f calls"
        assert out["g_calls"] == ({"all_reduce": 1}, {}), f"rank {rank}: g calls"


# -- lab07.2: column- and row-parallel linears -----------------------------------------------
def _mlp(rank: int, world_size: int) -> dict:
    torch.manual_seed(0)
    up, down = nn.Linear(8, 12, dtype=torch.float64), nn.Linear(12, 6, dtype=torch.float64)
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    col = ColumnParallelLinear.from_linear(up, W)
    row = RowParallelLinear.from_linear(down, W)
    t, r = world_size, rank
    lo, hi = r * 12 // t, (r + 1) * 12 // t
    assert col.bias is not None and col.bias.shape == (12 // t,), (
        f"rank {r}: the column-parallel bias has shape {tuple(col.bias.shape)}, not "
        f"({12 // t},): the bias of a column-parallel linear must be sharded like its output "
        f"columns: rank {r} holds bias[{lo}:{hi}], the entries of the rows of the weight it keeps"
    )
    xs = x.clone().requires_grad_()
    ys = row(torch.tanh(col(xs)))  # (3, 5, 6), whole on every rank
    ys.pow(2).sum().backward()
    xf = x.clone().requires_grad_()
    yf = down(torch.tanh(up(xf)))
    yf.pow(2).sum().backward()
    pairs = {
        "output": (ys, yf),
        "input grad": (xs.grad, xf.grad),
        "col weight": (col.weight, up.weight.chunk(t)[r]),
        "col bias": (col.bias, up.bias.chunk(t)[r]),
        "row weight": (row.weight, down.weight.chunk(t, dim=1)[r]),
        "row bias": (row.bias, down.bias),
        "col weight grad": (col.weight.grad, up.weight.grad.chunk(t)[r]),
        "col bias grad": (col.bias.grad, up.bias.grad.chunk(t)[r]),
        "row weight grad": (row.weight.grad, down.weight.grad.chunk(t, dim=1)[r]),
        "row bias grad": (row.bias.grad, down.bias.grad),
    }
    out = {k: (a.detach(), b.detach()) for k, (a, b) in pairs.items()}
    out["interleaved"] = up.weight.detach()[r::t]  # every t-th row: the wrong slice
    out["blocks"] = {  # every rank's block of the full weights: whose block a rank holds
        "col weight": up.weight.detach().chunk(t),
        "row weight": down.weight.detach().chunk(t, dim=1),
    }
    return out


@pytest.mark.lab07
@pytest.mark.task("lab07.2")
@pytest.mark.parametrize("tp", [2, 4])
def test_column_then_row_parallel_mlp_equals_the_full_layers(tp):
    """Catches interleaved instead of contiguous slices, the column bias kept whole (not sharded
    with the output columns), the row bias added on every rank (t times), a missing reduce, and gradients that are not the matching slice of the full one."""
    for rank, pairs in enumerate(launch(_mlp, tp)):
        assert not torch.equal(pairs["col weight"][0], pairs.pop("interleaved")), (
            f"rank {rank} kept every t-th row of the weight (interleaved): a column-parallel "
            "rank keeps one contiguous block of rows"
        )
        for key, blocks in pairs.pop("blocks").items():
            ours = pairs[key][0]
            held = [
                k for k, w in enumerate(blocks) if w.shape == ours.shape and torch.equal(w, ours)
            ]
            assert held in ([], [rank]), (
                f"rank {rank}'s {key} is block {held[0]} of the full weight's {tp}, not block "
                f"{rank}: each rank keeps the block of its own rank in the tp group (group_rank), "
                "not a neighbour's"
            )
        (ys, yf), bias = pairs["output"], pairs["row bias"][1]
        assert not torch.allclose(ys, yf + (tp - 1) * bias, rtol=0, atol=1e-9), (
            f"rank {rank}: the output is the full layer's plus (t - 1) times the bias: the bias "
            "was added on every rank; row-parallel adds it once, after the all-reduce"
        )
        for name, (ours, full) in pairs.items():
            torch.testing.assert_close(
                ours,
                full,
                rtol=1e-12,
                atol=EXACT,
                msg=lambda m, n=name, r=rank: f"rank {r}, {n}: {m}",
            )


# -- lab07.3: the tiny Llama, tensor-parallel ------------------------------------------------
@pytest.mark.lab07
@pytest.mark.task("lab07.3")
@pytest.mark.parametrize(
    "tp,config", [(2, None), (4, None), (4, MHA)], ids=["t2", "t4-kv-copies", "t4-kv-split"]
)
def test_tensor_parallel_llama_matches_the_reference(tp, config):
    """Outputs, every shard's gradient and the weights after 3 AdamW steps equal the single
    process's in fp64. Catches kv heads split wrongly (t = 4 with 2 kv heads: each rank needs a
    copy of the kv head its query heads read, its gradient summed over the copies), a wrong
    slice, a missing reduction."""
    comparisons = compare_with_reference(tp, config=config)
    for rank, c in enumerate(comparisons):
        bad = [n for n, e in c.errors.items() if n.startswith("grad") and e >= EXACT]
        assert not bad or not all(".wk." in n or ".wv." in n for n in bad), (
            f"rank {rank}: only the gradients of wk and wv are wrong ({', '.join(bad)}): the "
            "copies of a kv head (t > kv_heads) need their gradients summed over the ranks that "
            "hold the same copy"
        )
    error, where = _worst(comparisons)
    assert error < EXACT, f"{where}: {error:.2e}"


@pytest.mark.lab07
@pytest.mark.task("lab07.3")
@pytest.mark.parametrize("tp", [2, 4])
def test_counted_bytes_per_layer_equal_tp_comm_bytes(tp):
    """8 b s h (t-1)/t elements per layer and micro-batch (4 all-reduces), exactly; 12 with full
    recomputation. Catches f placed before each of wq, wk, wv (three all-reduces instead of one)."""
    out = count_tp_bytes(tp)
    assert out["calls"] == {"all_reduce": 4}, (
        f"tp = {tp}: one block's forward and backward called {out['calls']}, not 4 all-reduces: "
        "g after attention and after the MLP in forward, f before them in backward; one f "
        "before the shared input of wq, wk and wv, not one each (nothing when not parallel)"
    )
    want = tp_comm_bytes(micro_batch=2, seq_len=16, hidden=64, tp=tp, bytes_per_element=4)
    assert out["counted"] == out["formula"] == want, (
        f"tp = {tp}: the all-reduces sent {out['counted']} bytes, not 8 b s h (t - 1)/t "
        f"elements = {want}"
    )
    assert out["total"] - out["counted"] == out["extra_formula"]  # the kv copies' gradients
    full = count_tp_bytes(tp, recompute="full")
    assert full["counted"] == full["formula"] == 12 * 2 * 16 * 64 * (tp - 1) // tp * 4


@pytest.mark.lab07
@pytest.mark.task("lab07.3")
def test_stored_activations_per_layer_equal_the_formula_under_tp():
    """What one Block saves for backward on each rank, measured by the memory tracker, equals
    tp_activation_bytes: norms and the linears' shared inputs whole, the rest split by t."""
    for tp in (2, 4):
        out = measure_tp_activations(tp)
        assert out["per_rank"] == [out["formula"]] * tp, (
            f"tp = {tp}: each rank's block stores {out['per_rank']} bytes, not "
            f"tp_activation_bytes = {out['formula']} ({out}): more means the block is not "
            "split (whole heads or whole MLP on every rank), less that something is not stored"
        )


# -- lab07.4: vocabulary-parallel embedding and cross-entropy ---------------------------------
def _vocab(rank: int, world_size: int, vocab: int, multiple: int) -> dict:
    torch.manual_seed(0)
    t, vp = world_size, padded_vocab_size(vocab, world_size, multiple)
    embed = nn.Embedding(vocab, 6, dtype=torch.float64)
    ids = torch.randint(0, vocab, (3, 4))
    ids[0, :2] = torch.tensor([0, vocab - 1])  # the first and the last token
    ours = VocabParallelEmbedding.from_embedding(embed, W, multiple=multiple)
    out = ours(ids)
    out.pow(2).sum().backward()
    full = embed(ids)
    full.pow(2).sum().backward()
    grad = F.pad(embed.weight.grad, (0, 0, 0, vp - vocab)).chunk(t)[r := rank]
    # cross-entropy: the full logits (vocab real columns), padded with NONZERO junk columns
    logits = torch.randn(3, 4, vp, dtype=torch.float64)
    target = torch.randint(0, vocab, (3, 4))
    target[0, :2] = torch.tensor([0, vocab - 1])
    local = logits.chunk(t, dim=-1)[r].clone().requires_grad_()
    with CommCounter() as cc:
        loss = vocab_parallel_cross_entropy(local, target, W, vocab_size=vocab)
    loss.sum().backward()
    ref = logits[..., :vocab].clone().requires_grad_()
    want = F.cross_entropy(ref.reshape(-1, vocab), target.reshape(-1), reduction="none")
    want.sum().backward()
    logit_grad = F.pad(ref.grad, (0, vp - vocab)).chunk(t, dim=-1)[r]
    # the same logits shifted by 1000: the same loss, but exp(1000) overflows even in fp64
    shifted = vocab_parallel_cross_entropy(local.detach() + 1000, target, W, vocab_size=vocab)
    # each target's logit 50 above the others: a loss near 0 only if the right column is read
    spike = torch.zeros(3, 4, vp, dtype=torch.float64).scatter_(-1, target.unsqueeze(-1), 50.0)
    spiked = vocab_parallel_cross_entropy(spike.chunk(t, dim=-1)[r], target, W, vocab_size=vocab)
    spike_want = F.cross_entropy(
        spike[..., :vocab].reshape(-1, vocab), target.reshape(-1), reduction="none"
    ).view(3, 4)
    # the same largest logit (6) on every rank that holds a real column: a max that was not
    # all-reduced gives the right loss here and a wrong one on the spike
    level = torch.randn(3, 4, vp, dtype=torch.float64)
    width = vp // t
    level[..., [c * width for c in range(t) if c * width < vocab]] = 6.0
    leveled = vocab_parallel_cross_entropy(level.chunk(t, dim=-1)[r], target, W, vocab_size=vocab)
    level_want = F.cross_entropy(
        level[..., :vocab].reshape(-1, vocab), target.reshape(-1), reduction="none"
    ).view(3, 4)
    return {
        "embedding": (out.detach(), full.detach()),
        "embedding grad": (ours.weight.grad, grad),
        "loss": (loss.detach(), want.view(3, 4).detach()),
        "logit grad": (local.grad, logit_grad),
        "calls": cc.calls,
        "shifted": shifted,
        "spiked": (spiked, spike_want),
        "leveled": (leveled, level_want),
        "bytes": cc.total_bytes_sent,
    }


@pytest.mark.lab07
@pytest.mark.task("lab07.4")
@pytest.mark.parametrize(
    "tp,vocab,multiple",
    [(2, 250, 8), (4, 250, 8), (4, 256, 128)],
    ids=["t2-odd", "t4-odd", "t4-ranks-of-padding"],
)
def test_vocab_parallel_embedding_and_cross_entropy(tp, vocab, multiple):
    """Embedding rows, their gradients (padded rows: zero) and the per-token loss and logit
    gradients against nn.Embedding and F.cross_entropy; three all-reduces of b x s numbers.
    Catches padded logits not masked (their junk values change the loss), ids of other ranks not
    zeroed, a target logit summed from every rank, rows cut from the unpadded table, and a max
    that was not all-reduced (each rank subtracting its own)."""
    for rank, out in enumerate(launch(_vocab, tp, vocab, multiple)):
        calls = out.pop("calls")
        spiked, spike_want = out.pop("spiked")
        leveled, level_want = out.pop("leveled")
        vp = padded_vocab_size(vocab, tp, multiple)
        close = lambda a, b: torch.allclose(a, b, rtol=1e-9, atol=1e-9)  # noqa: E731
        padding_only = [c for c in range(tp) if c * (vp // tp) >= vocab]  # ranks of -inf only
        nan = out["loss"][0].isnan().any()
        assert not (nan and padding_only), (
            f"rank {rank}: the loss is nan although every logit is finite: ranks {padding_only} "
            f"hold only padding columns (masked to -inf, V_p = {vp} > {vocab}), so their own max "
            "is -inf and -inf - (-inf) is nan: each rank subtracted its own max; the max must be "
            "all-reduced (ReduceOp.MAX) over the group first, which is finite on every rank"
        )
        assert not (close(leveled, level_want) and not close(spiked, spike_want)), (
            f"rank {rank}: the loss is right when every rank's largest logit is the same and "
            f"wrong (up to {spiked.max().item():.3g}, not {spike_want.max().item():.3g}) when "
            "one rank holds a larger one: each rank subtracted its own max; the max must be "
            "all-reduced (ReduceOp.MAX) over the group first, so that every rank subtracts the "
            "same number from its logits"
        )
        assert calls == {"all_reduce": 3}, (
            f"rank {rank}: the collectives were {dict(calls)}, not three all-reduces of b x s "
            "numbers: the max logit (MAX), the sum of exponentials and the target logit"
        )
        assert out.pop("bytes") == 3 * collective_bytes("all_reduce", 3 * 4 * 8, tp)
        assert torch.allclose(spiked, spike_want, rtol=1e-9, atol=1e-9), (
            f"rank {rank}: with each target's logit 50 above the others the loss is up to "
            f"{spiked.max().item():.3g}, not {spike_want.max().item():.3g}: the target logit was "
            f"read from the wrong column (rank r's columns start at r V_p / t of the padded "
            f"vocabulary, V_p = {vp})"
        )
        shifted = out.pop("shifted")
        assert shifted.isfinite().all(), (
            f"rank {rank}: logits + 1000 give a loss of {shifted.flatten()[0].item()}: exp "
            "overflowed; subtract the all-reduced max logit before exponentiating"
        )
        torch.testing.assert_close(
            shifted,
            out["loss"][1],
            rtol=1e-9,
            atol=1e-9,
            msg=f"rank {rank}: the loss changed when every logit grew by 1000 (a softmax does not)",
        )
        hints = {
            "embedding": "rank r looks up the ids in its rows [r V_p/t, (r + 1) V_p/t) at row "
            "id - r V_p/t, gives zeros for every other id, and the ranks' results are summed",
            "embedding grad": "a rank's rows get the gradients of its own ids only (padded "
            "rows: zero)",
            "loss": "-log softmax[target] over the whole vocabulary",
            "logit grad": "softmax - onehot(target) on the rank's own columns",
        }
        for name, (ours, full) in out.items():
            why = hints.get(name, "")
            torch.testing.assert_close(
                ours,
                full,
                rtol=1e-12,
                atol=EXACT,
                msg=lambda m, n=name, r=rank, why=why: f"rank {r}, {n}: {why} ({m})",
            )


def _head(rank: int, world_size: int) -> tuple:
    torch.manual_seed(0)
    head = nn.Linear(6, 250, bias=False, dtype=torch.float64)
    ours = vocab_parallel_head(head, W, multiple=8)
    padded = torch.cat([head.weight.detach(), torch.zeros(6, 6, dtype=torch.float64)])
    return ours.weight.detach(), padded.chunk(world_size)[rank]


@pytest.mark.lab07
@pytest.mark.task("lab07.4")
def test_vocab_parallel_head_is_the_padded_tables_slice():
    """Rank r's rows of the head padded with zero rows to 256 (catches padding on the wrong
    side, or slicing before padding)."""
    for rank, (ours, want) in enumerate(launch(_head, 4)):
        torch.testing.assert_close(
            ours,
            want,
            rtol=0,
            atol=0,
            msg=lambda m, rank=rank: (
                f"rank {rank}'s head is not rows {rank} x 64 to {(rank + 1) * 64} of the head "
                "padded with zero rows to 256 (250 rounded up to a multiple of 8 x 4): pad at "
                f"the end first, then give each rank its contiguous slice ({m})"
            ),
        )


# -- lab07.5: sequence parallelism -----------------------------------------------------------
def _sp_functions(rank: int, world_size: int) -> dict:
    t = world_size
    full = torch.arange(2 * 8 * 3, dtype=torch.float64).view(2, 8, 3)
    mine = full.chunk(t, dim=1)[rank]
    x = mine.clone().requires_grad_()
    gathered = gather_from_sp(x, W)
    gathered.backward(torch.ones_like(gathered) * (rank + 1))
    y = (full * (rank + 1)).requires_grad_()
    scattered = reduce_scatter_to_sp(y, W)
    scattered.backward(torch.ones_like(scattered) * (rank + 1))
    z = full.clone().requires_grad_()
    split = scatter_to_sp(z, W)
    split.backward(torch.ones_like(split) * (rank + 1))
    return {
        "gathered": gathered.detach(),
        "x_grad": x.grad,
        "scattered": scattered.detach(),
        "y_grad": y.grad,
        "split": split.detach(),
        "z_grad": z.grad,
    }


@pytest.mark.lab07
@pytest.mark.task("lab07.5")
@pytest.mark.parametrize("tp", [2, 4])
def test_sequence_parallel_gather_and_reduce_scatter(tp):
    """All-gather forward / reduce-scatter backward, the reverse, and scatter / all-gather, along
    the sequence (dim 1). Catches gathering along the batch or hidden dim, a backward that keeps
    only the local gradient, and a non-contiguous slice order."""
    full = torch.arange(2 * 8 * 3, dtype=torch.float64).view(2, 8, 3)
    total = sum(range(1, tp + 1))
    ranks = torch.arange(1, tp + 1, dtype=full.dtype).repeat_interleave(8 // tp)  # (8,)
    for rank, out in enumerate(launch(_sp_functions, tp)):
        chunk = full.chunk(tp, dim=1)[rank]
        assert torch.equal(out["gathered"], full), (
            f"rank {rank}: the all-gather did not rebuild the whole sequence: gather the ranks' "
            "s/t slices along the sequence (dim 1), in rank order"
        )
        assert not torch.equal(out["x_grad"], torch.full_like(chunk, rank + 1.0)), (
            f"rank {rank}: the all-gather's backward kept only this rank's gradient; it is a "
            "reduce-scatter (every rank's gradient of my tokens, summed)"
        )
        assert torch.equal(out["x_grad"], torch.full_like(chunk, float(total))), (
            f"rank {rank}: the all-gather's backward is not the sum of every rank's gradient of "
            "its tokens (a reduce-scatter)"
        )
        assert torch.equal(out["scattered"], chunk * total), (
            f"rank {rank}: the reduce-scatter does not hold the ranks' sum of its own tokens "
            "(slice rank, along the sequence)"
        )
        assert torch.equal(out["y_grad"], ranks.view(1, 8, 1).expand_as(full)), (
            f"rank {rank}: the reduce-scatter's backward is not the all-gather of every rank's "
            "gradient"
        )
        held = [k for k in range(tp) if torch.equal(out["split"], full.chunk(tp, dim=1)[k])]
        assert torch.equal(out["split"], chunk), (
            f"rank {rank}: the scatter kept "
            + (f"rank {held[0]}'s tokens" if held else "tokens that are no rank's slice")
            + f", not its own slice {rank} of the sequence: slice r of t goes to rank r"
        )
        assert torch.equal(out["z_grad"], ranks.view(1, 8, 1).expand_as(full)), (
            f"rank {rank}: the scatter's backward is not the all-gather of the ranks' gradients"
        )


@pytest.mark.lab07
@pytest.mark.task("lab07.5")
@pytest.mark.parametrize(
    "tp,config", [(2, None), (4, None), (4, ODD)], ids=["t2", "t4-kv-copies", "t4-odd-vocab"]
)
def test_sequence_parallel_llama_matches_the_reference(tp, config):
    """Norms and residuals on s/t tokens, every norm weight's gradient all-reduced over the tp
    group: the same outputs, gradients and weights after 3 AdamW steps as one process. Catches the
    missing norm-gradient all-reduce (the norm weights' gradients are partial sums and the
    replicas drift) and a wrong gather or reduce-scatter."""
    multiple = 8 if config is ODD else 128
    comparisons = compare_with_reference(tp, sp=True, config=config, vocab_multiple=multiple)
    for rank, c in enumerate(comparisons):
        bad = [n for n, e in c.errors.items() if n.startswith("grad") and e >= EXACT]
        assert not bad or not all("norm" in n for n in bad), (
            f"rank {rank}: only the norm weights' gradients are wrong ({', '.join(bad)}): under "
            "sp each rank's covers its s/t tokens; every norm weight's gradient must be "
            "all-reduced over the tp group"
        )
    error, where = _worst(comparisons)
    assert error < EXACT, f"{where}: {error:.2e}"


@pytest.mark.lab07
@pytest.mark.task("lab07.5")
def test_sequence_parallel_bytes_and_stored_activations():
    """Under sp: 4 all-gathers and 4 reduce-scatters with the bytes of the 4 all-reduces
    (tp_comm_bytes, exactly; plus the norm weights' all-reduce when the weights train), and the
    norms' stored activations split by t (tracker = tp_activation_bytes)."""
    for tp in (2, 4):
        out = count_tp_bytes(tp, sp=True)
        assert out["calls"] == {"all_gather": 4, "reduce_scatter": 4}, (
            f"tp = {tp} with sp: one block called {out['calls']}, not 4 all-gathers and 4 "
            "reduce-scatters: under sp each region's entry all-gathers the s/t shards and its "
            "exit reduce-scatters (g becomes a reduce-scatter, f an all-gather)"
        )
        assert out["counted"] == out["formula"] == count_tp_bytes(tp)["formula"], (
            f"tp = {tp} with sp: {out['counted']} bytes sent, not the all-reduces' "
            f"{out['formula']} (an all-gather and a reduce-scatter send what one all-reduce does)"
        )
        assert out["total"] - out["counted"] == out["extra_formula"]
        act = measure_tp_activations(tp, sp=True)
        assert act["per_rank"] == [act["formula"]] * tp, (
            f"tp = {tp} with sp: each rank stores {act['per_rank']} bytes, not "
            f"tp_activation_bytes = {act['formula']} ({act}): under sp the norms and dropouts "
            "keep only the rank's s/t tokens"
        )
        assert act["formula"] < measure_tp_activations(tp)["formula"]


@pytest.mark.lab07
@pytest.mark.task("lab07.5")
def test_megatron_regather_saves_shards_for_two_more_all_gathers():
    """regather=True (Megatron-LM's sequence parallelism): the regions' gathered inputs are saved
    as s/t shards and all-gathered again in backward. Still exact against one process; every
    stored term split by t (tracker = formula = the whole block's bytes / t when the kv heads
    split too); two more all-gathers per layer when the weights train."""
    error, where = _worst(compare_with_reference(4, sp=True, regather=True))
    assert error < EXACT, f"{where}: {error:.2e}"
    for tp in (2, 4):
        act = measure_tp_activations(tp, sp=True, regather=True, config=MHA)
        assert act["per_rank"] == [act["formula"]] * tp, (tp, act)
        assert act["formula"] == measure_tp_activations(1, config=MHA)["formula"] // tp
        out = count_tp_bytes(tp, sp=True, regather=True)
        assert out["counted"] == out["formula"]
        assert out["total_calls"]["all_gather"] == 6
        assert out["total"] - out["counted"] == out["extra_formula"]


# -- not graded: bad input and the two "break it" experiments of the lab -----------------------
def _bad_inputs(rank: int, world_size: int) -> list[str]:
    from minitorch_dist.models import Llama
    from minitorch_dist.tensor_parallel import apply_tensor_parallel

    errors = []
    cases = [
        (LlamaConfig("h6", 256, 48, 1, 6, 6, 176, 64, 1e-5, 1e4), 4),  # heads 6, tp 4
        (LlamaConfig("f170", 256, 64, 1, 4, 4, 170, 64, 1e-5, 1e4), 4),  # ffn 170, tp 4
        (LlamaConfig("kv", 256, 64, 1, 4, 4, 176, 64, 1e-5, 1e4), 3),  # heads 4, tp 3
    ]
    for config, tp in cases:
        try:
            from minitorch_dist.tensor_parallel import check_tp_config

            check_tp_config(config, tp)
        except ValueError as e:
            errors.append(str(e))
    model = Llama(LlamaConfig.from_preset("tiny"))
    apply_tensor_parallel(model, W, sp=True)
    try:
        model(torch.zeros(1, 15, dtype=torch.long))  # 15 tokens on 2 ranks
    except ValueError as e:
        errors.append(str(e))
    return errors


def test_bad_input_names_the_constraint():
    errors = launch(_bad_inputs, 2)[0]
    assert errors == [
        "heads=6 is not divisible by tp=4",
        "ffn_hidden=170 is not divisible by tp=4",
        "heads=4 is not divisible by tp=3",
        "seq_len=15 is not divisible by tp=2",
    ]
    with pytest.raises(ValueError, match="hidden=6"):
        tp_comm_bytes(micro_batch=1, seq_len=8, hidden=6, tp=4)
    with pytest.raises(ValueError, match="seq_len=6 is not divisible by tp=4"):
        tp_comm_bytes(micro_batch=1, seq_len=6, hidden=8, tp=4, sp=True)


def test_closed_forms():
    """8 b s h (t-1)/t elements, 12 with full recompute, the same under sp; 2 bytes default."""
    b, s, h = 1, 2048, 4096
    assert tp_comm_bytes(micro_batch=b, seq_len=s, hidden=h, tp=8) == 8 * b * s * h * 7 // 8 * 2
    assert tp_comm_bytes(micro_batch=b, seq_len=s, hidden=h, tp=8, recompute="full") == (
        12 * b * s * h * 7 // 8 * 2
    )
    assert tp_comm_bytes(micro_batch=b, seq_len=s, hidden=h, tp=8, sp=True) == (
        tp_comm_bytes(micro_batch=b, seq_len=s, hidden=h, tp=8)
    )
    assert tp_comm_bytes(micro_batch=b, seq_len=s, hidden=h, tp=1) == 0
    assert tp_comm_bytes(micro_batch=b, seq_len=s, hidden=h, tp=8, sp=True, regather=True) == (
        10 * b * s * h * 7 // 8 * 2
    )
    with pytest.raises(ValueError, match="regather"):
        tp_comm_bytes(micro_batch=b, seq_len=s, hidden=h, tp=8, regather=True)
    assert padded_vocab_size(50257, 8) == 51200


def test_break_it_padding_mask_and_norm_gradients():
    """The lab's two break-it cells, caught by the same comparison: an odd vocabulary without the
    padding mask changes the loss; sequence parallelism without the norm-gradient all-reduce
    moves the norm weights away from the reference (and from each other) after one step."""
    unmasked = compare_with_reference(2, config=ODD, vocab_multiple=8, mask_padding=False, steps=1)
    assert unmasked[0].errors["loss 0"] > 1e-3
    drift = compare_with_reference(2, sp=True, reduce_norm_grads=False, steps=1)
    assert max(c.errors["weight norm.weight"] for c in drift) > 1e-4
    assert max(c.errors["grad layers.0.attn_norm.weight"] for c in drift) > 1e-4


def _on_a_grid(rank: int, world_size: int) -> tuple[int, list[float]]:
    from minitorch_dist.grid import ProcessGrid
    from minitorch_dist.models import Llama
    from minitorch_dist.reference import make_batches, run_training
    from minitorch_dist.tensor_parallel import apply_tensor_parallel, tp_loss_fn

    grid = ProcessGrid(dp=2, tp=2)
    torch.manual_seed(0)
    model = apply_tensor_parallel(Llama(LlamaConfig.from_preset("tiny")).double(), grid, sp=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batches = make_batches(256, 2, 16, 2)
    run = run_training(model, opt, batches, loss_fn=tp_loss_fn(grid, 256), split=None)
    return grid.tp_rank, run.losses


def test_apply_tensor_parallel_takes_a_grid_and_stays_inside_its_tp_group():
    """On a dp 2 x tp 2 grid each tp group trains on its own: both replicas give the same losses
    as one process (catches collectives on the world group instead of the tp group)."""
    from minitorch_dist.models import Llama
    from minitorch_dist.reference import make_batches, reference_run
    from minitorch_dist.tensor_parallel.measure import full_cross_entropy

    ref = reference_run(
        lambda: Llama(LlamaConfig.from_preset("tiny")),
        lambda p: torch.optim.AdamW(p, lr=1e-2),
        make_batches(256, 2, 16, 2),
        dtype=torch.float64,
        loss_fn=full_cross_entropy,
    )
    results = launch(_on_a_grid, 4)
    assert [r for r, _ in results] == [0, 1, 0, 1]
    for _, losses in results:
        torch.testing.assert_close(
            torch.tensor(losses), torch.tensor(ref.losses), rtol=1e-12, atol=EXACT
        )


def _explicit_norm_reduction(rank: int, world_size: int) -> list[torch.Tensor]:
    from minitorch_dist.models import Llama
    from minitorch_dist.reference import make_batches
    from minitorch_dist.tensor_parallel import apply_tensor_parallel, reduce_norm_grads, tp_loss_fn

    grads = []
    for hooks in (True, False):
        torch.manual_seed(0)
        model = Llama(LlamaConfig.from_preset("tiny")).double()
        apply_tensor_parallel(model, W, sp=True, reduce_norm_grads=hooks)
        inputs, targets = make_batches(256, 2, 16, 1)[0]
        tp_loss_fn(W, 256)(model(inputs), targets).backward()
        if not hooks:
            reduce_norm_grads(model, W)  # once, after backward, as Megatron-LM does
        grads.append(model.layers[1].mlp_norm.weight.grad)
    return grads


def test_explicit_reduce_norm_grads_equals_the_hooks():
    """reduce_norm_grads after backward gives the norm gradients the hooks give."""
    for hooked, explicit in launch(_explicit_norm_reduction, 2):
        torch.testing.assert_close(hooked, explicit, rtol=1e-12, atol=EXACT)


def _dropout_masks(rank: int, world_size: int, sp: bool) -> tuple[list, list]:
    outside, inside = tp_generators(0, W, sp=sp)
    masks = []
    for gen in (outside, inside):
        mask = torch.bernoulli(torch.full((4, 16), 0.5), generator=gen)
        gathered = [torch.empty_like(mask) for _ in range(world_size)]
        dist.all_gather(gathered, mask, group=W)
        masks.append(gathered)
    return masks[0], masks[1]


@pytest.mark.parametrize("sp", [False, True])
def test_dropout_streams_follow_megatrons_rule(sp):
    """Catches one seed everywhere (the ranks' heads share a dropout pattern) or a seed per rank
    outside the regions (replicated activations stop being replicas); with sp the activations
    outside are different tokens, so their masks differ too."""
    outside, inside = launch(_dropout_masks, 2, sp)[0]
    assert not torch.equal(inside[0], inside[1])
    assert torch.equal(outside[0], outside[1]) is (not sp)
