"""The MoE block and the MoE presets (models.moe): exact published parameter counts, the
block against a per-token loop, use_moe's determinism. Not graded: no parallel code here."""

from __future__ import annotations

import pytest
import torch

from minitorch_dist.models import Llama, LlamaConfig
from minitorch_dist.models.moe import (
    MoEBlock,
    MoEConfig,
    moe_active_params,
    moe_blocks,
    moe_num_params,
    moe_param_counts,
    moe_params_per_rank,
    moe_preset,
    moe_preset_names,
    use_moe,
)


def test_mixtral_8x7b_counts():
    """The checkpoint's 46,702,792,704 parameters; 12,879,925,248 used per token (2 of 8
    experts; the paper's "13B active"). Catches a router left out (8 x 4096 per layer), norms
    left out, or the head tied."""
    config, moe = moe_preset("mixtral-8x7b")
    assert moe_num_params(config, moe) == 46_702_792_704
    assert moe_active_params(config, moe) == 12_879_925_248
    assert moe_param_counts(config, moe)["router"] == 32 * 8 * 4096
    assert moe_params_per_rank(config, moe) == 46_702_792_704
    # ep = 8: one expert per rank, all the rest replicated = the active count minus one expert
    one_expert = 32 * 3 * 4096 * 14336
    assert moe_params_per_rank(config, moe, ep=8) == 12_879_925_248 - one_expert


def test_deepseek_v3_counts():
    """DeepSeek-V3's main model: 671,026,419,200 (the paper's 671B; the 685B checkpoint adds the
    14B multi-token-prediction module, not modelled), about 37.55B per token."""
    config, moe = moe_preset("deepseek-v3")
    assert moe_num_params(config, moe) == 671_026_419_200
    assert moe_active_params(config, moe) == 37_552_297_472
    counts = moe_param_counts(config, moe)
    assert counts["experts"] == 58 * 256 * 3 * 7168 * 2048
    assert counts["dense_mlp"] == 3 * 3 * 7168 * 18432
    with pytest.raises(ValueError, match="experts=256 is not divisible by ep=3"):
        moe_params_per_rank(config, moe, ep=3)
    with pytest.raises(ValueError, match="MLA attention is counted, not built"):
        MoEBlock(7168, moe)


def test_per_rank_counts_sum_back_under_tp_and_ep():
    """Experts split over ep: ep ranks hold E/ep each and the rest once each; under tp the
    expert widths split too. Summing the per-rank expert parts gives the whole."""
    config, moe = moe_preset("mixtral-8x7b")
    total = moe_num_params(config, moe)
    experts = moe_param_counts(config, moe)["experts"]
    for ep in (1, 2, 4, 8):
        assert moe_params_per_rank(config, moe, ep=ep) == total - experts + experts // ep
    tp2 = moe_params_per_rank(config, moe, tp=2)
    dense = config.num_params_per_rank(tp=2) - 32 * 3 * 4096 * 14336 // 2
    assert tp2 == dense + experts // 2 + 32 * 8 * 4096


def test_tiny_moe_count_equals_the_built_model():
    """moe_num_params matches sum(p.numel()) of the model use_moe builds."""
    config, moe = moe_preset("tiny-moe")
    model = use_moe(Llama(config), moe)
    assert len(moe_blocks(model)) == config.layers
    assert sum(p.numel() for p in model.parameters()) == moe_num_params(config, moe)
    shared = MoEConfig(experts=4, top_k=2, expert_ffn=8, shared_experts=1, dense_layers=1)
    model = use_moe(Llama(config), shared)
    assert len(moe_blocks(model)) == 1
    assert sum(p.numel() for p in model.parameters()) == moe_num_params(config, shared)
    assert set(moe_preset_names()) >= {"mixtral-8x7b", "deepseek-v3", "tiny-moe"}
    with pytest.raises(ValueError, match="unknown MoE preset"):
        moe_preset("gpt-4")


def test_use_moe_is_seeded_whatever_the_global_rng():
    """Two builds after different global seeds have the same experts (every rank must)."""
    config, moe = moe_preset("tiny-moe")
    torch.manual_seed(1)
    a = use_moe(Llama(config), moe)
    torch.manual_seed(2)
    b = use_moe(Llama(config), moe)
    for (name, p), q in zip(a.layers[0].mlp.named_parameters(), b.layers[0].mlp.parameters()):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("normalize", [True, False])
def test_block_equals_a_per_token_loop(normalize):
    """y_t = sum_j w_tj expert_{e_tj}(x_t) (+ shared), in fp64, against the block's batched
    index_add; with normalize the k weights sum to one."""
    torch.manual_seed(0)
    cfg = MoEConfig(
        experts=4,
        top_k=2,
        expert_ffn=8,
        shared_experts=1,
        normalize_weights=normalize,
        router_dtype=torch.float64,
    )
    block = MoEBlock(6, cfg).double()
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    y = block(x)
    flat = x.reshape(-1, 6)
    probs = (flat @ block.router.gate.weight.T).softmax(-1)
    for t in range(flat.shape[0]):
        top = probs[t].argsort(descending=True)[:2]
        w = probs[t, top] / (probs[t, top].sum() if normalize else 1)
        want = sum(w[j] * block.experts[int(top[j])](flat[t]) for j in range(2))
        want = want + block.shared(flat[t])
        torch.testing.assert_close(y.reshape(-1, 6)[t], want, rtol=0, atol=1e-14)
    assert block.last_router_probs.shape == (10, 4)
    assert block.last_expert_indices.shape == (10, 2)


def test_router_runs_in_fp32_for_a_bf16_model():
    """The router's softmax in fp32 even when the block is bf16."""
    block = MoEBlock(8, MoEConfig(experts=4, top_k=2, expert_ffn=8)).to(torch.bfloat16)
    y = block(torch.randn(3, 8, dtype=torch.bfloat16))
    assert y.dtype == torch.bfloat16 and block.last_router_probs.dtype == torch.float32


def test_moe_config_defaults():
    """Dropless by default; the published presets are valid Llama shapes."""
    assert MoEConfig(experts=8, top_k=2, expert_ffn=16).capacity_factor is None
    assert isinstance(moe_preset("mixtral-8x7b")[0], LlamaConfig)
