"""Expert parallelism (lab 10: tasks lab10.1 - lab10.4).

The router and the three load-balancing losses against hand computations on a held example
(lab10.1); capacity and the drop policy on a held routing (lab10.2); dispatch and combine
against the rows they must move, forward and backward, with uneven and empty splits (lab10.3);
the expert-parallel MoE layer on 2 and 4 ranks against the single-process ``MoEBlock`` (fp64,
dropless: outputs, input gradients, every expert's and the router's gradient), the tiny Llama
with MoE blocks trained with ep = 2 and 4 against its reference through
:mod:`minitorch_dist.reference`, and the bytes counted from the real split sizes against
``all_to_all_bytes`` under exactly uniform routing (lab10.4).

No test computes a task's answer itself (a student edition would ship it): lab10.4's tests run
the layer on the lab's own dispatch and combine (lab10.3), and the single-process ``MoEBlock``
routes with the lab's router and capacity (lab10.1 and lab10.2); a stub there is reported as
"needs lab10.3 first". Each test's docstring names the wrong answer it catches.
"""

from __future__ import annotations

import random
import time
from fractions import Fraction

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from minitorch_dist import launch
from minitorch_dist.expert_parallel import (
    all_to_all_bytes,
    apply_capacity,
    apply_expert_parallel,
    capacity_buffer_bytes,
    combine,
    dispatch,
    ep_step_bytes,
    exchange_counts,
    expert_capacity,
    load_balancing_loss,
    local_experts,
    top_k_route,
)
from minitorch_dist.expert_parallel.measure import (
    compare_with_reference,
    measure_dispatch,
    observe_dispatch,
)
from minitorch_dist.models.moe import MoEBlock, MoEConfig

EXACT = 1e-12  # fp64: only the order of additions differs
W = dist.group.WORLD

# The held example of the losses: T = 4 tokens, E = 4 experts, rows sum to 1.
# top-1: 0, 0, 3, 1       -> f = (2, 1, 0, 1) / 4
# top-2: {0,1} {0,2} {3,2} {1,0} -> c = (3, 2, 2, 1) / 4
# P (column means) = (0.3, 0.25, 0.225, 0.225)
PROBS = torch.tensor(
    [[0.4, 0.3, 0.2, 0.1], [0.4, 0.1, 0.3, 0.2], [0.1, 0.2, 0.3, 0.4], [0.3, 0.4, 0.1, 0.2]],
    dtype=torch.float64,
)


# -- lab10.1: the router and the auxiliary loss --------------------------------------------------
@pytest.mark.lab10
@pytest.mark.task("lab10.1")
def test_top_k_route_held_example_with_ties():
    """Catches weights not renormalised, the softmax taken after the top-k (over the k chosen
    logits only), experts in ascending order, and ties going to the higher index (torch.topk makes no promise about ties; the route must be reproducible)."""
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 0.0, 1.0, 2.0]])
    weights, experts, probs = top_k_route(logits, 2)
    assert experts.tolist() == [[1, 2], [0, 3]], (
        f"chose experts {experts.tolist()}, not [[1, 2], [0, 3]]: the k experts go in order of "
        "probability, a tie going to the lower index (a stable sort; torch.topk makes no "
        "promise about ties)"
    )
    torch.testing.assert_close(probs, logits.softmax(-1))
    total = weights.sum(-1)
    assert torch.allclose(total, torch.ones(2)), (
        f"the k weights sum to {total.tolist()}: they were not renormalised (normalize=True "
        "divides them by their sum)"
    )
    torch.testing.assert_close(weights, torch.full((2, 2), 0.5))  # equal logits, renormalised
    w3, e3, _ = top_k_route(torch.tensor([[0.0, 1.0, 2.0, 3.0]]), 3)
    assert e3.tolist() == [[3, 2, 1]], (
        f"chose experts {e3.tolist()}, not [[3, 2, 1]]: the k experts go in order of "
        "probability, largest probability first, not by expert index"
    )
    p = torch.tensor([0.0, 1.0, 2.0, 3.0]).softmax(-1)
    torch.testing.assert_close(w3[0], p[[3, 2, 1]] / p[[3, 2, 1]].sum())
    raw, _, _ = top_k_route(torch.tensor([[0.0, 1.0, 2.0, 3.0]]), 3, normalize=False)
    assert not torch.allclose(raw.sum(), torch.tensor(1.0)), (
        f"with normalize=False the 3 weights {raw[0].tolist()} sum to 1: the softmax ran over "
        "the k chosen logits (after the top-k); it runs over all E experts first, and the "
        f"chosen probabilities {p[[3, 2, 1]].tolist()} are kept as they are (Switch)"
    )
    torch.testing.assert_close(raw[0], p[[3, 2, 1]])


@pytest.mark.lab10
@pytest.mark.drawn_per_run
@pytest.mark.task("lab10.1")
def test_top_k_route_ties_on_logits_drawn_per_run():
    """Catches a table of the held example, or torch.topk's order for ties: on logits drawn for
    this run from a few integers (many ties), each row's k experts are the k most probable,
    largest first, a tie going to the lower index, and nothing left out beats them."""
    seed = random.randrange(2**31)
    gen = torch.Generator().manual_seed(seed)
    experts_n, k = random.choice([(4, 2), (6, 3), (8, 2), (16, 4)])
    logits = torch.randint(0, 3, (64, experts_n), generator=gen).float()
    weights, experts, probs = top_k_route(logits, k)
    for t in range(logits.shape[0]):
        row, chosen = probs[t], experts[t].tolist()
        # the rank of every expert: by probability, largest first, then by index
        order = sorted(range(experts_n), key=lambda e: (-row[e].item(), e))
        assert chosen == order[:k], (
            f"logits {logits[t].tolist()} (seed {seed}, drawn for this run): chose experts "
            f"{chosen}, not {order[:k]}: the k experts go in order of probability, a tie going "
            "to the lower index (a stable sort; torch.topk makes no promise about ties)"
        )
    torch.testing.assert_close(weights.sum(-1), torch.ones(logits.shape[0]))


@pytest.mark.lab10
@pytest.mark.task("lab10.1")
def test_top_k_route_softmax_in_fp32_and_bad_k():
    """Catches a softmax in bf16 (the router's probabilities lose their small differences) and a
    k larger than E accepted (torch.topk would fail later with a shape error)."""
    logits = torch.randn(8, 4, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    weights, experts, probs = top_k_route(logits, 2)
    assert probs.dtype == torch.float32 and weights.dtype == torch.float32
    torch.testing.assert_close(probs, logits.float().softmax(-1))
    assert experts.dtype == torch.int64 and experts.shape == (8, 2)
    with pytest.raises(ValueError, match="top_k=5 exceeds experts=4"):
        top_k_route(logits, 5)


@pytest.mark.lab10
@pytest.mark.task("lab10.1")
def test_switch_loss_held_example():
    """Switch: E * sum f_i P_i with top-1 fractions = 4 * (0.5*0.3 + 0.25*0.25 + 0.25*0.225).
    Catches a missing factor E (0.26875), a mean over experts instead of the sum (0.26875), soft
    fractions f = P (4 * sum P_i^2 = 1.0225) and P from the chosen probabilities only (0.6)."""
    hand = 4 * (0.5 * 0.3 + 0.25 * 0.25 + 0 * 0.225 + 0.25 * 0.225)
    assert hand == pytest.approx(1.075)
    got = load_balancing_loss(PROBS, style="switch")
    assert got.shape == ()
    # P from the chosen probabilities only (0.8, 0.4, 0, 0.4) / 4: E * sum f_i P_i = 0.6
    top_k_probs = 4 * (0.5 * 0.2 + 0.25 * 0.1 + 0 * 0 + 0.25 * 0.1)
    assert got.item() == pytest.approx(hand, abs=1e-12), f"switch loss {got.item()}, not {hand}" + (
        ": the factor E (the number of experts, 4) is missing"
        if got.item() == pytest.approx(hand / 4)
        else ": P_i was computed from the top-k probabilities only (each token's chosen experts); "
        "P_i is the mean of expert i's probability over all tokens, chosen or not"
        if got.item() == pytest.approx(top_k_probs)
        else ""
    )
    # "switch" counts the first choice only, whatever top_k says
    assert load_balancing_loss(PROBS, top_k=2, style="switch").item() == pytest.approx(hand)


@pytest.mark.lab10
@pytest.mark.task("lab10.1")
def test_topk_and_mixtral_losses_held_example():
    """DeepSpeed top-k: E/k * sum c_i P_i with all k choices counted = 2 * 0.51875 = 1.0375;
    Hugging Face's Mixtral: E * sum c_i P_i = 2.075, k times larger. Catches top-1 fractions
    used for top-k (1.075 or 0.5375), the missing 1/k in "topk" (2.075), a 1/k in "mixtral"
    (1.0375), and a missing factor E."""
    sum_cp = 0.75 * 0.3 + 0.5 * 0.25 + 0.5 * 0.225 + 0.25 * 0.225
    assert sum_cp == pytest.approx(0.51875)
    topk = load_balancing_loss(PROBS, top_k=2, style="topk").item()
    mixtral = load_balancing_loss(PROBS, top_k=2, style="mixtral").item()
    # P from the chosen probabilities only: (1.1, 0.7, 0.6, 0.4) / 4, so E/k sum c_i P_i = 0.7875
    assert topk == pytest.approx(4 / 2 * sum_cp, abs=1e-12), f"topk loss {topk}, not 1.0375" + (
        ": P_i was computed from the top-k probabilities only (each token's chosen experts); "
        "P_i is the mean of expert i's probability over all tokens, chosen or not"
        if topk == pytest.approx(0.7875)
        else ""
    )
    assert mixtral == pytest.approx(4 * sum_cp, abs=1e-12)
    assert mixtral == pytest.approx(2 * topk)
    # at k = 1 all three are Switch's
    for style in ("topk", "mixtral"):
        assert load_balancing_loss(PROBS, top_k=1, style=style).item() == pytest.approx(1.075)


@pytest.mark.lab10
@pytest.mark.task("lab10.1")
def test_losses_at_uniform_routing_and_their_gradient():
    """Uniform routing gives 1 (switch, topk) and k (mixtral). The gradient reaches the probs
    only through P: d loss / d p_ti = E f_i / T (switch). Catches fractions computed from the
    probabilities (soft counts carry a gradient of their own) and a wrong style accepted."""
    probs = torch.full((8, 4), 0.25, dtype=torch.float64)
    p = PROBS.clone().requires_grad_()
    load_balancing_loss(p, style="switch").backward()
    f = torch.tensor([0.5, 0.25, 0.0, 0.25], dtype=torch.float64)
    top1 = F.one_hot(PROBS.argmax(-1), 4).bool()
    assert not (p.grad[~top1 & (f > 0)] == 0).all(), (
        "the loss has no gradient on the probabilities of the experts a token did not choose: "
        "P_i was computed from the top-k probabilities only; P_i is the mean of expert i's "
        "probability over all tokens, chosen or not (d loss / d p_ti = E f_i / T for every t)"
    )
    torch.testing.assert_close(p.grad, (4 * f / 4).expand(4, 4))
    # token t: (0.4, 0.3, 0.2, 0.1) rolled by t -- every expert is chosen equally, P_i = 1/4
    rolled = torch.stack([torch.roll(torch.tensor([0.4, 0.3, 0.2, 0.1]), t) for t in range(8)])
    for style, want in (("switch", 1.0), ("topk", 1.0), ("mixtral", 2.0)):
        got = load_balancing_loss(rolled.double(), top_k=2, style=style).item()
        assert got == pytest.approx(want), f"{style} loss {got} at uniform routing, not {want}"
    with pytest.raises(ValueError, match="style must be one of switch, topk, mixtral"):
        load_balancing_loss(probs, style="gshard")
    with pytest.raises(ValueError, match="top_k=5 exceeds experts=4"):
        load_balancing_loss(probs, top_k=5, style="topk")


# -- lab10.2: capacity and the drop policy ------------------------------------------------------
@pytest.mark.lab10
@pytest.mark.task("lab10.2")
def test_expert_capacity_values():
    """C = ceil(T/E * cf * k): catches floor instead of ceil (10 tokens, 4 experts: 2, not 3), a
    forgotten k, min_capacity ignored, float rounding (1000/10 * 1.1 gives 111 in floats), and a
    capacity factor <= 0 or k > E accepted silently."""
    got = expert_capacity(10, 4, 1.0)
    assert got == 3, f"10 tokens on 4 experts at cf = 1 give capacity {got}, not 3" + (
        ": it is ceil(T k cf / E), not floor" if got == 2 else ""
    )
    for args, kwargs, want in (
        ((6, 4, 1.0), {"top_k": 2}, 3),
        ((64, 4, 1.25), {"top_k": 2}, 40),
        ((1000, 10, 1.1), {}, 110),
        ((8, 4, 1.0), {"min_capacity": 4}, 4),
        ((8, 4, 2.0), {"min_capacity": 1}, 4),
    ):
        got = expert_capacity(*args, **kwargs)
        hints = {
            (111, 110): ": T / E * cf in floats is 110.00000000000001, whose ceil is 111; "
            "compute C = ceil(T k cf / E) exactly (fractions.Fraction of cf, or integers)",
            (2, 3): ": each token takes k = 2 slots (C = ceil(T k cf / E)); k was left out",
            (20, 40): ": each token takes k = 2 slots (C = ceil(T k cf / E)); k was left out",
            (2, 4): ": min_capacity is a floor on C (C = max(ceil(T k cf / E), min_capacity))",
        }
        assert got == want, f"expert_capacity{args}, {kwargs} gives {got}, not {want}" + hints.get(
            (got, want), ""
        )
    # bad input: a capacity factor <= 0 or a k > E is refused, naming the constraint
    for cf in (0, -1.0):
        with pytest.raises(ValueError, match="capacity_factor must be a number > 0"):
            expert_capacity(8, 4, cf)
    with pytest.raises(ValueError, match="top_k=5 exceeds experts=4"):
        expert_capacity(8, 4, 1.0, top_k=5)


@pytest.mark.lab10
@pytest.mark.task("lab10.2")
def test_apply_capacity_held_example():
    """Token order, then slot order, first come first served, C = 2:
    t0 -> 0 (1st), 1 (1st); t1 -> 0 (2nd), 2 (1st); t2 -> 0 (3rd: dropped), 1 (2nd);
    t3 -> 1 (3rd: dropped), 0 (4th: dropped). Catches slot-major priority (all first choices
    before any second: t3's first choice kept, t2's second dropped), keeping C + 1 (<= instead
    of <), and counting drops per token instead of per expert."""
    indices = torch.tensor([[0, 1], [0, 2], [0, 1], [1, 0]])
    keep = apply_capacity(indices, 3, 2)
    assert keep.dtype == torch.bool
    kept = [int(keep[indices == e].sum()) for e in range(3)]
    assert max(kept) <= 2, (
        f"experts keep {kept} choices with capacity C = 2: a choice is kept only while fewer "
        "than C earlier choices went to its expert (position < C, not <= C)"
    )
    assert not (keep[3, 0] and not keep[2, 1]), (
        f"kept {keep.tolist()}: token 3's first choice was kept and token 2's second dropped, so "
        "the queue was filled slot-major (every token's first choice before any second); it is "
        "token-major: token 0's choices, then token 1's, ... first come, first served"
    )
    want = [[True, True], [True, True], [False, True], [False, False]]
    assert keep.tolist() == want, f"kept {keep.tolist()}, not {want} (token order, then slot order)"
    assert apply_capacity(indices, 3, 0).sum() == 0
    assert apply_capacity(indices, 3, 4).all()


@pytest.mark.lab10
@pytest.mark.drawn_per_run
@pytest.mark.task("lab10.2")
def test_capacity_and_drops_at_sizes_drawn_per_run():
    """Catches a table of the values above: at sizes drawn for this run, C is the least integer
    with C E >= T k cf (exactly: cf as its decimal), and each expert keeps its first min(count,
    C) choices in token-major order (token 0's choices, then token 1's, ...), dropping the rest."""
    seed = random.randrange(2**31)
    rng = random.Random(seed)
    tokens, experts, k = rng.randrange(1, 5000), rng.choice([2, 4, 8, 16, 64]), rng.choice([1, 2])
    cf = rng.choice([0.5, 1.0, 1.1, 1.25, 1.3, 2.0, 0.7])
    c = expert_capacity(tokens, experts, cf, top_k=k)
    need = Fraction(tokens * k) * Fraction(repr(cf))
    assert c * experts >= need and (c - 1) * experts < need, (
        f"T = {tokens}, E = {experts}, k = {k}, cf = {cf} (seed {seed}, drawn for this run): "
        f"capacity {c}, not the least C with C E >= T k cf; compute ceil(T k cf / E) exactly "
        "from the arguments, not from stored cases"
    )
    gen = torch.Generator().manual_seed(seed)
    n, e, cap = rng.randrange(4, 40), rng.choice([2, 3, 5]), rng.randrange(0, 8)
    indices = torch.stack([torch.randperm(e, generator=gen)[:2] for _ in range(n)])
    keep = apply_capacity(indices, e, cap)
    for expert in range(e):
        mine = keep[indices == expert].tolist()  # this expert's choices, token-major
        count = len(mine)
        assert mine == [True] * min(count, cap) + [False] * max(count - cap, 0), (
            f"indices {indices.tolist()}, C = {cap} (seed {seed}, drawn for this run): expert "
            f"{expert}'s choices kept {mine}; it keeps its first min(count, C) choices in "
            "token-major order (first come, first served), and drops the rest"
        )


@pytest.mark.lab10
@pytest.mark.task("lab10.2")
def test_block_drops_equal_the_capacity_rule():
    """The single-process MoEBlock with cf = 1 on a skewed batch drops exactly what
    ``apply_capacity(indices, E, expert_capacity(T, E, cf, k))`` drops; a token whose every
    choice was dropped gets exactly zero from the block. Catches a lab rule that disagrees with
    the model's (e.g. capacity from T/E without k)."""
    torch.manual_seed(0)
    cfg = MoEConfig(experts=4, top_k=2, expert_ffn=8, capacity_factor=1.0)
    block = MoEBlock(8, cfg).double()
    x = torch.randn(12, 8, dtype=torch.float64)
    x[:, :4] = 0
    x[:8, 0], x[:8, 1] = 3.0, 2.0  # tokens 0-7 all to experts 0 and 1
    x[8:, 2], x[8:, 3] = 3.0, 2.0  # tokens 8-11 to experts 2 and 3: all kept
    with torch.no_grad():
        block.router.gate.weight.zero_()
        block.router.gate.weight[:, :4] = torch.eye(4, dtype=torch.float64)
    y = block(x)
    c = expert_capacity(12, 4, 1.0, top_k=2)
    assert c == 6, f"12 tokens, 4 experts, k = 2, cf = 1: capacity {c}, not ceil(T k cf / E) = 6"
    want = apply_capacity(block.last_expert_indices, 4, c)
    assert torch.equal(block.last_keep, want), (
        f"the block kept {block.last_keep.int().tolist()}, apply_capacity keeps "
        f"{want.int().tolist()}: the block must drop with the lab's rule"
    )
    assert want[:6].all() and not want[6:8].any() and want[8:].all(), (
        f"tokens 0-7 all choose experts 0 and 1 with C = 6: tokens 0-5 must keep both choices "
        f"and 6, 7 lose both (first come, first served), 8-11 keep theirs; kept {want.int().tolist()}"
    )
    assert torch.equal(y[6:8], torch.zeros(2, 8, dtype=torch.float64))


# -- lab10.3: dispatch and combine over all-to-all ----------------------------------------------
def _splits(rank: int, n: int) -> list[int]:
    """Uneven, with empty splits, not symmetric: rank r sends (r + 2 j) % 3 rows to rank j (so
    it receives (j + 2 r) % 3 from rank j, not what it sends)."""
    return [(rank + 2 * j) % 3 for j in range(n)]


def _dispatch_rank(rank: int, n: int) -> dict:
    torch.set_num_threads(1)
    send = _splits(rank, n)
    counts = torch.tensor(send, dtype=torch.int64)
    recv = exchange_counts(counts, W).tolist()
    wrong = torch.tensor([int(recv != [(j + 2 * rank) % 3 for j in range(n)])])
    dist.all_reduce(wrong)  # wrong counts on any rank: nobody dispatches (the sizes disagree)
    if wrong.item():
        return {"send": send, "recv": recv}
    # row i of rank r for rank j: the value 100 r + 10 j + i, in 2 columns
    rows = [
        torch.tensor([[100.0 * rank + 10 * j + i] * 2 for i in range(s)])
        for j, s in enumerate(send)
    ]
    x = torch.cat(rows).double().view(-1, 2).requires_grad_()
    try:
        got = dispatch(x, send, recv, W)
    except RuntimeError as e:
        refused = "split" in f"{e}".lower()  # torch's words for mismatched split sizes
        if not refused:
            raise
        raise AssertionError(
            f"rank {rank}: torch's all-to-all refused the split sizes ({e}); the output is "
            f"sum(recv_splits) = {sum(recv)} rows, recv_splits[j] from rank j, and the input "
            f"sum(send_splits) = {sum(send)} rows: were the send and receive splits swapped?"
        ) from e
    try:
        got.backward(got.detach() * 2 + 1)  # a gradient that names its row
    except RuntimeError as e:
        if "split" not in f"{e}".lower():
            raise
        raise AssertionError(
            f"rank {rank}: torch's all-to-all refused the backward's split sizes ({e}); the "
            f"backward sends each received row's gradient home: sum(send_splits) = {sum(send)} "
            "rows out, the forward's splits swapped (recv_splits going, send_splits coming)"
        ) from e
    back = combine(got.detach() + 0.5, send, recv, W)
    return {
        "send": send,
        "recv": recv,
        "got": got.detach(),
        "x": x.detach(),
        "grad": x.grad,
        "back": back,
    }


@pytest.mark.lab10
@pytest.mark.task("lab10.3")
@pytest.mark.parametrize("n", [2, 4])
def test_dispatch_moves_rows_and_backward_returns_gradients(n):
    """Counts exchanged first: rank r receives (j + 2 r) % 3 rows from rank j. Catches counts
    not exchanged (a rank's own send counts taken for its receive counts), splits swapped
    (input for output sizes), rows from the wrong rank, a backward that does not send the
    gradients home (x.grad != 2 x + 1), and combine not undoing dispatch."""
    outs = launch(_dispatch_rank, n)
    for r, out in enumerate(outs):
        recv = [(j + 2 * r) % 3 for j in range(n)]
        assert out["recv"] == recv, f"rank {r} received counts {out['recv']}, not {recv}" + (
            ": the counts were not exchanged (its own send counts came back); exchange_counts "
            "is an all-to-all, chunk j to rank j"
            if out["recv"] == out["send"]
            else ""
        )
        want = [100.0 * j + 10 * r + i for j in range(n) for i in range((j + 2 * r) % 3)]
        got = out["got"][:, 0].tolist()
        assert got == want, (
            f"rank {r} received rows {got}, not {want} (the value 100 j + 10 r + i is row i "
            f"from rank j): the rows from rank j come as block j, in rank order"
        )
        torch.testing.assert_close(
            out["grad"],
            out["x"] * 2 + 1,
            rtol=0,
            atol=0,
            msg=lambda m, r=r: (
                f"rank {r}'s x.grad is not 2 x + 1 (the gradient each received row was given): "
                f"the backward must send every row's gradient home to the rank and place it "
                f"came from ({m})"
            ),
        )
        torch.testing.assert_close(
            out["back"],
            out["x"] + 0.5,
            rtol=0,
            atol=0,
            msg=lambda m, r=r: (
                f"rank {r}: combine(dispatch(x) + 0.5) is not x + 0.5: combine must undo "
                f"dispatch, the same all-to-all with the splits swapped ({m})"
            ),
        )


def _disagree_rank(rank: int, n: int) -> str:
    torch.set_num_threads(1)
    x = torch.zeros(3, 2)
    send = [1, 2] if rank == 0 else [3, 0]
    recv = [1, 2] if rank == 0 else [2, 0]  # rank 0 expects 2 rows from rank 1, which sends 3
    try:
        dispatch(x if rank == 0 else torch.zeros(3, 2), send, recv, W, check=True)
    except ValueError as err:
        return str(err)
    return "no error"


def test_disagreeing_splits_fail_fast_with_a_clear_error():
    """Ranks that disagree on a buffer size would hang in all_to_all_single (or abort the process
    in gloo); with ``check=True`` every rank raises a ValueError naming both ranks and numbers,
    within seconds."""
    start = time.perf_counter()
    outs = launch(_disagree_rank, 2, timeout=30)
    assert time.perf_counter() - start < 20
    assert "rank 0 expects 2 rows from rank 1, which sends 3" in outs[0]
    assert "rank 1 sends 3 rows to rank 0, which expects 2" in outs[1]


# -- lab10.4: the expert-parallel MoE layer -----------------------------------------------------
CFG = MoEConfig(experts=4, top_k=2, expert_ffn=12)
TOKENS, HIDDEN = 16, 8


def _block_and_data() -> tuple[MoEBlock, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    block = MoEBlock(HIDDEN, CFG).double()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(TOKENS, HIDDEN, generator=gen, dtype=torch.float64)
    g = torch.randn(TOKENS, HIDDEN, generator=gen, dtype=torch.float64)
    return block, x, g


def _ep_block_rank(rank: int, n: int) -> dict:
    torch.set_num_threads(1)
    block, x, g = _block_and_data()
    layer = apply_expert_parallel(block, W)
    seen = observe_dispatch(layer)  # the split sizes, watched from outside the layer
    mine = x.chunk(n)[rank].clone().requires_grad_()
    y = layer(mine)
    ((y * g.chunk(n)[rank]).sum() / mine.shape[0]).backward()  # this rank's mean
    grads = {name: p.grad for name, p in layer.named_parameters() if p.grad is not None}
    return {
        "y": y.detach(),
        "x_grad": mine.grad,
        "grads": grads,
        "send": list(seen.send_splits),
        "counts": layer.last_tokens_per_expert.tolist(),
    }


@pytest.mark.lab10
@pytest.mark.task("lab10.4")
@pytest.mark.parametrize("n", [2, 4])
def test_ep_block_equals_single_process_block(n):
    """fp64, dropless, each rank its 1/n of the tokens: outputs, input gradients, the router's
    gradient (averaged over ranks) and each rank's experts' gradients equal the full block's.
    Catches outputs not unsorted (rows of the wrong tokens), gate weights applied twice or not
    at all, experts cut from the wrong indices or laid out e % ep, and gradients not scaled by
    1/n."""
    outs = launch(_ep_block_rank, n)
    for r, out in enumerate(outs):  # rank j gets the rows of the experts it owns
        want = [sum(out["counts"][e] for e in local_experts(4, n, j)) for j in range(n)]
        strided = [sum(out["counts"][j::n]) for j in range(n)]
        assert out["send"] == want, f"rank {r} sent {out['send']} rows to the ranks, not {want}" + (
            ": rank j owns the contiguous experts j E/ep ... (j + 1) E/ep - 1 (local_experts), "
            "not every ep-th one (e % ep)"
            if out["send"] == strided
            else ""
        )
    block, x, g = _block_and_data()
    x.requires_grad_()
    y = block(x)
    ((y * g).sum() / TOKENS).backward()
    full = dict(block.named_parameters())
    with torch.no_grad():  # the answer of a layer that forgets to undo its sort by expert
        unsorted = []
        for mine in x.detach().chunk(n):
            weights, indices, _ = block.router(mine)
            rows = torch.stack(
                [
                    block.experts[int(e)](mine[i // indices.shape[1]])
                    for i, e in enumerate(indices.reshape(-1))
                ]
            )
            rows = rows[torch.sort(indices.reshape(-1), stable=True).indices]  # still sorted
            unsorted.append((rows.view(*indices.shape, -1) * weights[..., None]).sum(1))
    ours = torch.cat([o["y"] for o in outs])
    assert not torch.allclose(ours, torch.cat(unsorted), rtol=0, atol=EXACT), (
        "the expert outputs were left sorted by expert: they were not put back in the choices' "
        "order (the inverse of the sort) before the gate weights were applied"
    )
    torch.testing.assert_close(
        ours,
        y.detach(),
        rtol=0,
        atol=EXACT,
        msg=lambda m: (
            "the outputs differ from the full block's: the rows a rank receives come source "
            "by source (all of rank 0's rows, then rank 1's, ...), each source's rows sorted by "
            "local expert (received[j] counts them): run each row through the expert it was "
            f"sent to ({m})"
        ),
    )
    x_grads = torch.cat([o["x_grad"] for o in outs]) / n  # each rank's loss is its own mean
    torch.testing.assert_close(
        x_grads,
        x.grad,
        rtol=0,
        atol=EXACT,
        msg=lambda m: (
            "the input gradients differ from the full block's: the backward must carry each "
            f"row's gradient back through combine and dispatch to its token ({m})"
        ),
    )
    for r, out in enumerate(outs):
        owned = {
            f"experts.{e}.{w}.weight"
            for e in range(r * 4 // n, (r + 1) * 4 // n)
            for w in ("w1", "w2", "w3")
        }
        assert set(out["grads"]) == owned | {"router.gate.weight"}, (
            f"rank {r} holds gradients of {sorted(out['grads'])}, not its own experts "
            f"{sorted(owned)} and the router"
        )
        for name, grad in out["grads"].items():
            torch.testing.assert_close(
                grad,
                full[name].grad,
                rtol=0,
                atol=EXACT,
                msg=lambda m, n=name, r=r: f"rank {r} {n}: {m}",
            )


class _FixedRouter(torch.nn.Module):
    """Every token to experts 0 and 1, weights 1/2: the routing of the layout test."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        t = x.shape[0]
        experts = torch.tensor([[0, 1]]).expand(t, 2)
        return torch.full((t, 2), 0.5, dtype=x.dtype), experts, torch.full((t, 4), 0.25)


def _layout_rank(rank: int, n: int) -> dict:
    block, x, _ = _block_and_data()
    layer = apply_expert_parallel(block, W)
    layer.router = _FixedRouter()
    seen = observe_dispatch(layer)
    layer(x.chunk(n)[rank])
    return {"send": list(seen.send_splits), "recv": list(seen.recv_splits)}


def _assert_contiguous_layout() -> None:
    """Every token chooses experts 0 and 1, which rank 0 owns (E = 4, ep = 2): every row must go
    to rank 0; with experts laid out e % ep, expert 1's rows go to rank 1."""
    n, per_rank = 2, TOKENS // 2 * 2  # each rank's 8 tokens, 2 choices each
    for rank, out in enumerate(launch(_layout_rank, n)):
        assert out["send"] == [per_rank, 0], (
            f"rank {rank}: every token chose experts 0 and 1, which rank 0 owns, but the layer "
            f"sent {out['send']} rows to ranks 0 and 1: rank r owns the contiguous experts "
            "r E/ep ... (r + 1) E/ep - 1 (local_experts), not every ep-th one (e % ep); sort the "
            "choices by expert and send expert e's rows to rank e // (E/ep)"
        )
        assert out["recv"] == ([per_rank] * n if rank == 0 else [0] * n), f"rank {rank}: {out}"


@pytest.mark.lab10
@pytest.mark.task("lab10.4")
def test_experts_are_laid_out_in_contiguous_blocks():
    """Every token chooses experts 0 and 1, which rank 0 owns (E = 4, ep = 2: rank r owns
    experts 2r and 2r + 1): every row goes to rank 0. Catches experts laid out e % ep (rank r
    owning r, r + ep, ...), whose rows for expert 1 go to rank 1."""
    _assert_contiguous_layout()


@pytest.mark.lab10
@pytest.mark.task("lab10.4")
@pytest.mark.parametrize("ep", [2, 4])
def test_tiny_llama_with_moe_trains_like_its_reference(ep):
    """The tiny Llama with MoE blocks, 3 AdamW steps in fp64 on ep ranks (data-parallel rows,
    experts split) against one process through minitorch_dist.reference: losses, outputs, every
    held gradient and weight to 1e-10, every parameter held by some rank. A difference is first
    traced to the experts' layout (the rows of expert e go to rank e // (E/ep))."""
    for rank, comparison in enumerate(compare_with_reference(ep)):
        assert comparison.errors["names held by no rank"] == 0
        if comparison.max_abs_error >= 1e-10:
            _assert_contiguous_layout()  # names the layout when that is the mistake
        assert comparison.max_abs_error < 1e-10, (
            f"rank {rank}: after 3 steps {comparison.worst} differs from one process's by "
            f"{comparison.max_abs_error:.3g} (more than 1e-10)"
        )
        assert any(n.startswith("grad layers.0.mlp.experts.") for n in comparison.errors)


@pytest.mark.lab10
@pytest.mark.task("lab10.4")
@pytest.mark.parametrize("ep", [2, 4])
def test_bytes_from_split_sizes_equal_the_formula_under_uniform_routing(ep):
    """Exactly uniform routing (token t to experts t, t+1 mod E; 64 tokens per rank): the bytes
    each rank sends, counted from the layer's real split sizes, are T k h (ep-1)/ep per dispatch
    and per combine, four of them per step (also as CommCounter books them). Catches splits
    counted per expert instead of per rank, and a rank's own rows counted as sent."""
    for run in measure_dispatch(ep, routing="uniform"):
        formula = all_to_all_bytes(tokens=64, top_k=2, hidden=64, ep=ep, bytes_per_element=4)
        assert run["tokens_per_expert"] == [32, 32, 32, 32], (
            f"ep = {ep}, uniform routing: tokens per expert {run['tokens_per_expert']}, not 32 "
            "each: the layer routes with lab10.1's router and keeps every choice (dropless)"
        )
        assert run["dispatch_bytes"] == run["combine_bytes"] == formula == run["formula"], (
            f"ep = {ep}: dispatch sent {run['dispatch_bytes']} bytes and combine "
            f"{run['combine_bytes']}, not T k h (ep - 1)/ep = {formula}: the split sizes must "
            "count rows per destination rank (an expert's rows to the rank holding it), and a "
            "rank's rows for itself are not sent"
        )
        assert run["step_bytes"] == run["counter_bytes"] == ep_step_bytes(formula), (
            f"ep = {ep}: a step sent {run['step_bytes']} bytes (CommCounter: "
            f"{run['counter_bytes']}), not four all-to-alls of {formula} (dispatch and combine, "
            "forward and backward)"
        )


# -- not graded: closed forms, the capacity buffer, bad input ------------------------------------
def test_all_to_all_bytes_values_and_errors():
    """T k h (ep-1)/ep * bytes: 4096 tokens, k=2, h=4096, ep=8, bf16 -> 7/8 of 64 MiB."""
    assert all_to_all_bytes(tokens=4096, top_k=2, hidden=4096, ep=8) == 56 * 2**20
    assert all_to_all_bytes(tokens=64, top_k=2, hidden=64, ep=1) == 0
    assert ep_step_bytes(10, moe_layers=3) == 120
    with pytest.raises(ValueError, match="is not divisible by ep=3"):
        all_to_all_bytes(tokens=64, top_k=1, hidden=8, ep=3)
    with pytest.raises(ValueError, match="experts=4 is not divisible by ep=3"):
        capacity_buffer_bytes(tokens=64, top_k=1, hidden=8, ep=3, experts=4, capacity_factor=1)
    with pytest.raises(ValueError, match="capacity_factor must be a number > 0"):
        capacity_buffer_bytes(tokens=64, top_k=1, hidden=8, ep=2, experts=4, capacity_factor=0)


def test_capacity_buffer_is_cf_times_dropless_under_uniform_routing():
    """E/ep * C rows to each other rank, C = T k cf / E: cf times the dropless bytes when
    T k cf / E is an integer."""
    kw = {"tokens": 64, "top_k": 2, "hidden": 64, "ep": 4}
    buffer = capacity_buffer_bytes(**kw, experts=4, capacity_factor=1.25)
    assert buffer == 1.25 * all_to_all_bytes(**kw)


@pytest.mark.parametrize("routing", ["uniform", "skewed", "random"])
def test_capacity_dispatch_sends_the_same_bytes_whatever_the_routing(routing):
    """The dense buffer's bytes (from its split sizes, and as CommCounter books them) equal
    capacity_buffer_bytes under every routing; skewed routing drops choices, dropless none."""
    cfg = MoEConfig(experts=4, top_k=2, expert_ffn=16, capacity_factor=1.25)
    runs = measure_dispatch(4, moe=cfg, dispatch_mode="capacity", routing=routing)
    for run in runs:
        assert run["dispatch_bytes"] == run["combine_bytes"] == run["buffer_formula"]
        assert run["counter_bytes"] == 4 * run["buffer_formula"]
        assert (run["dropped"] > 0) == (routing == "skewed")


def _capacity_rank(rank: int, n: int) -> dict:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = MoEConfig(experts=4, top_k=2, expert_ffn=12, capacity_factor=1.0)
    block = MoEBlock(HIDDEN, cfg).double()
    x = torch.randn(
        TOKENS * n, HIDDEN, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    layer = apply_expert_parallel(block, W, dispatch_mode="capacity")
    return {"y": layer(x.chunk(n)[rank]).detach(), "keep": layer.last_keep}


@pytest.mark.parametrize("n", [2, 4])
def test_capacity_mode_equals_the_block_on_each_ranks_tokens(n):
    """With a capacity, each rank's capacity is computed on its own T tokens: its outputs equal
    the single-process block (same cf) run on those tokens alone, drops included."""
    outs = launch(_capacity_rank, n)
    torch.manual_seed(0)
    cfg = MoEConfig(experts=4, top_k=2, expert_ffn=12, capacity_factor=1.0)
    block = MoEBlock(HIDDEN, cfg).double()
    x = torch.randn(
        TOKENS * n, HIDDEN, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    dropped = 0
    for rank, out in enumerate(outs):
        y = block(x.chunk(n)[rank]).detach()
        torch.testing.assert_close(out["y"], y, rtol=0, atol=EXACT)
        assert torch.equal(out["keep"], block.last_keep)
        dropped += int((~block.last_keep).sum())
    assert dropped > 0, "the example should drop something at cf = 1"


def _bad_ep_rank(rank: int, n: int) -> str:
    try:
        apply_expert_parallel(MoEBlock(8, MoEConfig(experts=4, top_k=2, expert_ffn=8)), W)
    except ValueError as err:
        return str(err)
    return "no error"


def test_experts_not_divisible_by_ep_is_a_value_error():
    """Catches 4 experts spread over 3 ranks (one rank would own none, or a shape error later)."""
    assert launch(_bad_ep_rank, 3) == ["experts=4 is not divisible by ep=3"] * 3
    with pytest.raises(ValueError, match="top_k=5 exceeds experts=4"):
        MoEConfig(experts=4, top_k=5, expert_ffn=8)
    with pytest.raises(ValueError, match="capacity_factor must be a number > 0"):
        MoEConfig(experts=4, top_k=2, expert_ffn=8, capacity_factor=0.0)


def test_break_it_without_the_gradient_sync():
    """Catches the data parallelism EP rides on left out: without averaging the replicated
    gradients and dividing the experts' by ep, the first step's gradients are off at once."""
    broken = compare_with_reference(2, steps=1, sync_grads=False)[0].errors
    assert broken["grad layers.0.mlp.router.gate.weight"] > 1e-6
    assert broken["grad layers.0.mlp.experts.0.w1.weight"] > 1e-6


def test_aux_loss_statistics_are_per_batch_they_see():
    """The scope matters: the loss of a whole batch is not the mean of its halves' losses (the
    fractions and mean probabilities are products, not sums, of per-token terms), so gradient
    accumulation and data parallelism change the auxiliary loss unless the counts are pooled."""
    halves = (PROBS[:2], PROBS[2:])
    whole = load_balancing_loss(PROBS, top_k=2, style="topk").item()
    parts = [load_balancing_loss(h, top_k=2, style="topk").item() for h in halves]
    assert whole == pytest.approx(1.0375) and parts == pytest.approx([1.25, 1.0])
    assert sum(parts) / 2 == pytest.approx(1.125)  # not 1.0375


def test_the_lab_router_and_capacity_agree_with_the_models_reference():
    """models.moe's names for the capacity (slots_for, capacity_keep) call the lab's
    expert_capacity / apply_capacity: they agree, ties included."""
    from minitorch_dist.models.moe import capacity_keep, slots_for

    gen = torch.Generator().manual_seed(0)
    logits = torch.randint(0, 3, (64, 8), generator=gen).double()  # many ties
    weights, experts, probs = top_k_route(logits, 3)
    for tokens, e, cf, k in ((64, 8, 1.0, 3), (1000, 10, 1.1, 1), (7, 3, 0.5, 2)):
        assert expert_capacity(tokens, e, cf, top_k=k) == slots_for(tokens, e, cf, k)
    for c in (0, 5, 24, 30):
        assert torch.equal(apply_capacity(experts, 8, c), capacity_keep(experts, 8, c))


def test_observe_dispatch_needs_an_expert_parallel_layer():
    """The observer watches an ExpertParallelMoE's forward: anything else is a ValueError."""
    with pytest.raises(ValueError, match="ExpertParallelMoE"):
        observe_dispatch(torch.nn.Linear(2, 2))
