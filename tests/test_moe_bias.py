"""DeepSeek-V3's auxiliary-loss-free balancing (models.moe_bias) and its measurement
(expert_parallel.bias_balance), against hand-worked routings and the paper's rules
(DeepSeek-AI 2024, section 2.1.2, eqs. 16-20)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.distributed as dist

from minitorch_dist import launch
from minitorch_dist.expert_parallel import apply_expert_parallel
from minitorch_dist.expert_parallel.bias_balance import balance_run, dropped_share
from minitorch_dist.models.moe import MoEBlock, MoEConfig, Router, moe_preset
from minitorch_dist.models.moe_bias import (
    BiasedRouter,
    sequence_balance_loss,
    update_routing_bias,
)

CFG = MoEConfig(experts=4, top_k=2, expert_ffn=8, router_bias=True)


def _router_with_probs(probs: torch.Tensor, bias: list[float]) -> tuple[BiasedRouter, torch.Tensor]:
    """A router whose softmax gives ``probs`` (1, E) for the input x = e_0: gate column 0 is
    log(probs)."""
    router = BiasedRouter(4, 4, 2)
    with torch.no_grad():
        router.gate.weight.zero_()
        router.gate.weight[:, 0] = probs.log()
        router.bias.copy_(torch.tensor(bias))
    return router, torch.eye(4)[:1]


def test_zero_bias_routes_as_the_plain_router() -> None:
    torch.manual_seed(0)
    plain = Router(16, 8, 2)
    biased = BiasedRouter(16, 8, 2)
    biased.gate.weight.data.copy_(plain.gate.weight.data)
    x = torch.randn(32, 16)
    for a, b in zip(plain(x), biased(x)):
        assert torch.equal(a, b)


def test_bias_selects_but_the_weights_stay_unbiased() -> None:
    """probs (0.4, 0.3, 0.2, 0.1), bias (-0.15, 0, 0.15, 0): scores (0.25, 0.3, 0.35, 0.1), so
    experts 2 then 1, weighted by 0.2 and 0.3 renormalised: 0.4 and 0.6 (not the biased 0.35
    and 0.3 renormalised, 0.538 and 0.462)."""
    router, x = _router_with_probs(torch.tensor([0.4, 0.3, 0.2, 0.1]), [-0.15, 0.0, 0.15, 0.0])
    weights, experts, probs = router(x)
    assert experts.tolist() == [[2, 1]], "the selection must use probs + bias"
    assert torch.allclose(weights, torch.tensor([[0.4, 0.6]])), "weights from unbiased probs"
    assert torch.allclose(probs, torch.tensor([[0.4, 0.3, 0.2, 0.1]]))


def test_gradient_reaches_the_gate_not_the_bias() -> None:
    block = MoEBlock(16, CFG)
    block(torch.randn(12, 16)).sum().backward()
    assert block.router.gate.weight.grad is not None
    assert not block.router.bias.requires_grad
    assert "router.bias" in block.state_dict() and "router.load" not in block.state_dict()


def test_update_lowers_overloaded_raises_underloaded() -> None:
    """load (5, 1, 3, 3), mean 3: b += gamma * sign(3 - load) = (-g, +g, 0, 0); count reset."""
    block = MoEBlock(16, CFG)
    block.router.load.copy_(torch.tensor([5, 1, 3, 3]))
    (used,) = update_routing_bias(block, 0.25)
    assert used.tolist() == [5, 1, 3, 3]
    assert block.router.bias.tolist() == [-0.25, 0.25, 0.0, 0.0]
    assert block.router.load.tolist() == [0, 0, 0, 0]


def test_router_counts_every_forward_since_the_update() -> None:
    block = MoEBlock(16, CFG)
    x = torch.randn(10, 16)
    block(x)
    first = torch.bincount(block.last_expert_indices.reshape(-1), minlength=4)
    block(x)
    assert torch.equal(block.router.load, 2 * first)  # two micro-batches: one step's load


def test_update_needs_a_biased_router_and_a_positive_speed() -> None:
    plain = MoEBlock(16, dataclasses.replace(CFG, router_bias=False))
    with pytest.raises(ValueError, match="no BiasedRouter"):
        update_routing_bias(plain, 0.1)
    with pytest.raises(ValueError, match="speed"):
        update_routing_bias(MoEBlock(16, CFG), 0.0)


def test_deepseek_preset_refuses_only_for_mla() -> None:
    _, moe = moe_preset("deepseek-v3")
    small = dataclasses.replace(moe, experts=8, top_k=2, expert_ffn=8, attention=None)
    assert isinstance(MoEBlock(16, small).router, BiasedRouter)
    with pytest.raises(ValueError, match="MLA attention is counted, not built"):
        MoEBlock(16, dataclasses.replace(small, attention=moe.attention))


def test_sequence_balance_loss_by_hand() -> None:
    """Even routing gives 1. One sequence of 2 tokens, E = 4, k = 1, probs (0.7, 0.1, 0.1, 0.1)
    for both: f = (4/2 * 2, 0, 0, 0) = (4, 0, 0, 0), P_0 = 0.7: loss 2.8. A second sequence
    routed to expert 3 alone scores 2.8 as well, though the two together are balanced better:
    the loss is per sequence."""
    even = torch.full((6, 3), 1 / 3)
    assert sequence_balance_loss(even, top_k=1, seq_len=3).item() == pytest.approx(1.0)
    one = torch.tensor([[0.7, 0.1, 0.1, 0.1]] * 2)
    assert sequence_balance_loss(one, top_k=1, seq_len=2).item() == pytest.approx(2.8)
    two = torch.cat([one, one.flip(-1)])
    assert sequence_balance_loss(two, top_k=1, seq_len=2).item() == pytest.approx(2.8)
    assert sequence_balance_loss(two, top_k=1, seq_len=4).item() == pytest.approx(1.6)
    with pytest.raises(ValueError, match="whole sequences"):
        sequence_balance_loss(two, top_k=1, seq_len=3)


def test_dropped_share() -> None:
    assert dropped_share(torch.tensor([6, 2, 0, 0]), 3) == pytest.approx(3 / 8)
    assert dropped_share(torch.tensor([2, 2, 2, 2]), 3) == 0.0


def test_bias_balances_the_skewed_problem_and_the_loss_free_run_has_no_aux_term() -> None:
    """The measurement the chapter shows: from a router skewed onto 2 of 8 experts, the bias
    brings max/mean load from about 3 to below 1.5, where no balancing stays above 2.5."""
    none = balance_run("none", steps=80)
    bias = balance_run("bias", steps=80)
    assert none["imbalance"][0] == bias["imbalance"][0] > 2.5  # the same start
    assert sum(none["imbalance"][-20:]) / 20 > 2.5
    assert sum(bias["imbalance"][-20:]) / 20 < 1.5
    assert max(bias["bias"]) > 0 > min(bias["bias"])
    with pytest.raises(ValueError, match="method"):
        balance_run("sinkhorn")


def _ep_rank(rank: int, world_size: int) -> dict:
    torch.manual_seed(0)
    block = MoEBlock(16, dataclasses.replace(CFG, experts=4))
    layer = apply_expert_parallel(block, dist.group.WORLD)
    torch.manual_seed(100 + rank)  # each rank routes its own tokens
    layer(torch.randn(8, 16)).sum().backward()
    local = layer.router.load.clone()
    (total,) = update_routing_bias(layer, 0.5, group=dist.group.WORLD)
    return {"local": local.tolist(), "total": total.tolist(), "bias": layer.router.bias.tolist()}


def test_expert_parallel_ranks_sum_the_load_and_keep_one_bias() -> None:
    runs = launch(_ep_rank, 2)
    summed = [a + b for a, b in zip(runs[0]["local"], runs[1]["local"])]
    assert runs[0]["total"] == runs[1]["total"] == summed
    assert runs[0]["bias"] == runs[1]["bias"]
    mean = sum(summed) / 4
    assert runs[0]["bias"] == [0.5 * ((mean > n) - (mean < n)) for n in summed]


def _dp4_ep2_rank(rank: int, world_size: int) -> dict:
    """dp = 4 ranks, ep = 2: two expert-parallel groups, {0, 1} and {2, 3}."""
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    torch.manual_seed(0)
    block = MoEBlock(16, dataclasses.replace(CFG, experts=4))
    layer = apply_expert_parallel(block, groups[rank // 2])
    torch.manual_seed(100 + rank)  # each rank routes its own tokens, two micro-batches
    for _ in range(2):
        layer(torch.randn(8, 16)).sum().backward()
    local = layer.router.load.clone()
    try:
        update_routing_bias(layer, 0.5)  # no group on an expert-parallel model
        refused = False
    except ValueError:
        refused = True
    (total,) = update_routing_bias(layer, 0.5, group=dist.group.WORLD)  # every dp rank
    return {
        "local": local.tolist(),
        "total": total.tolist(),
        "bias": layer.router.bias.tolist(),
        "refused": refused,
    }


def test_the_bias_load_is_summed_over_every_data_parallel_rank_when_dp_exceeds_ep() -> None:
    """Catches a bias update that sums the load over the expert-parallel group only (or not at
    all): with dp = 4 and ep = 2 the two ep groups' copies of the bias would drift apart. Summed
    over all four data-parallel ranks and both micro-batches, the copies move alike; an
    expert-parallel model without a group is refused."""
    runs = launch(_dp4_ep2_rank, 4)
    summed = [sum(r["local"][e] for r in runs) for e in range(4)]
    assert sum(summed) == 4 * 2 * 8 * 2  # 4 ranks, 2 micro-batches of 8 tokens, top-2
    assert all(r["total"] == summed for r in runs)
    assert all(r["bias"] == runs[0]["bias"] for r in runs)
    mean = sum(summed) / 4
    assert runs[0]["bias"] == [0.5 * ((mean > n) - (mean < n)) for n in summed]
    assert all(r["refused"] for r in runs)
    halves = [[a + b for a, b in zip(runs[i]["local"], runs[i + 1]["local"])] for i in (0, 2)]
    assert halves[0] != halves[1]  # each ep group alone would have moved its bias differently
