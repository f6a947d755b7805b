"""The model, ready to be cut: Attention on a tensor-parallel slice of whole heads, and pipeline
stages (``split_model``) that chain to exactly ``Llama.forward``. Single process, fp64. Each
docstring names the bug the test catches."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from minitorch_dist.models import (
    Attention,
    Llama,
    LlamaConfig,
    LlamaStage,
    cross_entropy,
    padded_vocab_size,
    rope_for,
    split_layers,
    split_model,
)

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
    cos, sin = rope_for(cfg, 11, None, torch.float64)
    shards = [_tp_shard(full, r, tp) for r in range(tp)]
    summed = sum(shard(x, cos, sin) for shard in shards)
    torch.testing.assert_close(summed, full(x, cos, sin), rtol=1e-12, atol=1e-12)


def _grads(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize(
    ("cfg", "sizes"),
    [(TINY, [1, 1]), (TINY, [2]), (DEEP, [2, 1, 1]), (DEEP, [1, 2, 1]), (DEEP, [1, 1, 1, 1])],
    ids=lambda v: v.name if isinstance(v, LlamaConfig) else str(v),
)
def test_chained_stages_equal_the_model_exactly(cfg: LlamaConfig, sizes: list[int]) -> None:
    """Catches a stage that computes anything differently from Llama.forward (RoPE made from the
    wrong length or dtype, a block skipped or run twice, the norm on the wrong stage) or that
    breaks the graph: outputs and every gradient equal bit for bit in fp64, both when autograd
    runs through the chain and when each stage's input is a detached leaf, as a pipeline sends."""
    torch.manual_seed(0)
    model = Llama(cfg).double()
    tokens = torch.randint(0, cfg.vocab_size, (2, 13))
    want = model(tokens)
    cross_entropy(want, tokens).backward()
    want_grads = _grads(model)

    stages = split_model(model, sizes)
    model.zero_grad()
    x = tokens
    for stage in stages:
        x = stage(x)
    assert torch.equal(x, want)
    cross_entropy(x, tokens).backward()
    got = _grads(model)
    for name in want_grads:
        assert torch.equal(got[name], want_grads[name]), name

    # as a pipeline runs it: forward with detached hand-offs, then backward stage by stage
    model.zero_grad()
    inputs, outputs, x = [], [], tokens
    for stage in stages:
        x = x.detach().requires_grad_(x.is_floating_point())
        inputs.append(x)
        x = stage(x)
        outputs.append(x)
    grad = None
    for i in reversed(range(len(stages))):
        if grad is None:
            cross_entropy(outputs[i], tokens).backward()
        else:
            outputs[i].backward(grad)
        grad = inputs[i].grad
    got = _grads(model)
    for name in want_grads:
        assert torch.equal(got[name], want_grads[name]), name


def test_stages_hold_only_their_own_share_of_the_model() -> None:
    """Catches a stage holding copies (the optimizer would update the wrong tensors), the whole
    model as an attribute (every rank would hold every parameter), or the embedding, norm or
    head on the wrong stage."""
    model = Llama(DEEP)
    first, middle, last = split_model(model, [1, 2, 1])
    assert (first.has_embed, first.has_head) == (True, False)
    assert (middle.has_embed, middle.has_head) == (False, False)
    assert (last.has_embed, last.has_head) == (False, True)
    assert first.embed is model.embed and last.head is model.head and last.norm is model.norm
    assert [b is model.layers[1 + j] for j, b in enumerate(middle.layers)] == [True, True]
    owned = [{id(p) for p in s.parameters()} for s in (first, middle, last)]
    assert all(not (a & b) for i, a in enumerate(owned) for b in owned[i + 1 :])
    assert set().union(*owned) == {id(p) for p in model.parameters()}
    assert {n.split(".")[0] for n, _ in middle.named_parameters()} == {"layers"}
    assert {n.split(".")[0] for n, _ in first.named_parameters()} == {"embed", "layers"}
    assert {n.split(".")[0] for n, _ in last.named_parameters()} == {"layers", "norm", "head"}
    assert sum(p.numel() for s in (first, middle, last) for p in s.parameters()) == (
        DEEP.num_params()
    )


def test_stage_rope_follows_the_sequence_length_of_its_input() -> None:
    """Catches RoPE tables fixed at build time (a stage would fail on another length) and a
    later stage (fed hidden states, not tokens) that forgets to check max_seq_len."""
    model = Llama(TINY).double()
    _, last = split_model(model, [1, 1])
    for s in (3, 17):
        assert last(torch.randn(2, s, TINY.hidden, dtype=torch.float64)).shape == (2, s, 256)
    with pytest.raises(ValueError, match="exceeds max_seq_len=256"):
        last(torch.randn(1, 257, TINY.hidden, dtype=torch.float64))


def test_pieces_compose_to_forward() -> None:
    """Catches Llama.forward drifting from its documented pieces (a stage would then differ)."""
    torch.manual_seed(1)
    model = Llama(DEEP).double()
    tokens = torch.randint(0, DEEP.vocab_size, (2, 9))
    x = model.embed_tokens(tokens)
    cos, sin = model.rope(9, tokens.device, x.dtype)
    x = model.run_blocks(x, cos, sin, range(0, 3))
    x = model.run_blocks(x, cos, sin, slice(3, 4))
    assert torch.equal(model.output(x), model(tokens))


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ([1, 2], "must sum to the model's layers=4"),
        ([2, 0, 2], "must be ints >= 1"),
        ([], "must be ints >= 1"),
    ],
)
def test_split_model_rejects_bad_sizes(sizes: list[int], message: str) -> None:
    """Catches a split that silently drops or repeats blocks."""
    with pytest.raises(ValueError, match=message):
        split_model(Llama(DEEP), sizes)
    with pytest.raises(ValueError, match="exceeds the model's layers=4"):
        LlamaStage(Llama(DEEP), 2, 5)


# -- split_layers, padded_vocab_size, num_params_per_rank ----------------------------------------
@pytest.mark.parametrize(
    ("layers", "pp", "expected"),
    [
        (4, 1, [4]),
        (4, 4, [1, 1, 1, 1]),
        (10, 4, [3, 3, 2, 2]),
        (7, 3, [3, 2, 2]),
        (80, 6, [14] * 2 + [13] * 4),
    ],
)
def test_split_layers_gives_the_remainder_to_the_first_stages(layers, pp, expected):
    assert split_layers(layers, pp) == expected
    assert sum(expected) == layers


def test_split_layers_refuses_more_stages_than_layers():
    with pytest.raises(ValueError, match="layers=2 < pp=4"):
        split_layers(2, 4)
    with pytest.raises(ValueError, match="pp must be an integer >= 1"):
        split_layers(4, 0)


def test_padded_vocab_size_is_megatrons_rule():
    assert padded_vocab_size(50257, 1) == 50304  # GPT-2's famous padding
    assert padded_vocab_size(50257, 8) == 51200
    assert padded_vocab_size(32000, 8) == 32768
    assert padded_vocab_size(128256, 2) == 128256  # Llama 3's vocabulary needs none at tp=2
    assert padded_vocab_size(250, 2, multiple=1) == 250
    assert padded_vocab_size(251, 2, multiple=1) == 252


def _held(model: Llama, tp: int, stage: LlamaStage) -> int:
    """Count what a rank holds by cutting real tensors: columns/rows of each weight over tp."""
    cfg = model.config
    vocab = cfg.vocab_size if tp == 1 else padded_vocab_size(cfg.vocab_size, tp)
    total = 0
    for name, p in stage.named_parameters():
        if "norm" in name:
            total += p.numel()
        elif name.endswith(("wk.weight", "wv.weight")) and cfg.kv_heads < tp:
            total += cfg.head_dim * cfg.hidden
        elif name in ("embed.weight", "head.weight"):
            total += vocab * cfg.hidden // tp
        else:
            total += p.numel() // tp
    return total


@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("pp", [1, 2, 3])
def test_num_params_per_rank_counts_a_ranks_share(tp, pp):
    cfg = LlamaConfig("t", 250, 64, 5, 4, 2, 176, 64, 1e-5, 1e4)
    model = Llama(cfg)
    stages = split_model(model, split_layers(cfg.layers, pp))
    held = [cfg.num_params_per_rank(tp=tp, pp=pp, stage=i) for i in range(pp)]
    assert held == [_held(model, tp, s) for s in stages]
    if tp == 1:
        assert sum(held) == cfg.num_params()


def test_num_params_per_rank_of_real_models():
    for name in ("llama-2-7b", "llama-3-70b", "llama-3.1-405b"):
        cfg = LlamaConfig.from_preset(name)
        assert cfg.num_params_per_rank() == cfg.num_params()
    cfg = LlamaConfig.from_preset("llama-3-70b")  # V = 128256 = 128 * 1002: padded at tp = 8 only
    h, V = cfg.hidden, cfg.vocab_size
    norms = (2 * cfg.layers + 1) * h
    assert cfg.num_params_per_rank(tp=2) == (cfg.num_params() - norms) // 2 + norms
    assert cfg.num_params_per_rank(tp=8) == (cfg.num_params() - norms - 2 * V * h) // 8 + norms + (
        2 * padded_vocab_size(V, 8) * h // 8
    )


def test_num_params_per_rank_names_the_constraint():
    cfg = LlamaConfig.from_preset("llama-3-70b")
    with pytest.raises(ValueError, match="heads=64 is not divisible by tp=3"):
        cfg.num_params_per_rank(tp=3)
    with pytest.raises(ValueError, match="stage=4 must be < pp=4"):
        cfg.num_params_per_rank(pp=4, stage=4)
    with pytest.raises(ValueError, match="layers=80 < pp=81"):
        cfg.num_params_per_rank(pp=81)
