"""Tests for minitorch_dist.models: configs (exact parameter counts of real checkpoints), the tiny
Llama (shapes, causality, RoPE, GQA, init, meta/fake construction, what it saves for backward) and
the synthetic Markov data. Each docstring names the bug the test catches."""

from __future__ import annotations

import math
import time

import pytest
import torch
import torch.nn.functional as F
from own_process import own_process
from torch._subclasses.fake_tensor import FakeTensorMode

from minitorch_dist.models import (
    AttentionCore,
    Llama,
    LlamaConfig,
    apply_rope,
    cross_entropy,
    llama,
    preset_names,
    rope_tables,
)
from minitorch_dist.models.data import (
    SyntheticTokens,
    markov_chain,
    markov_entropy,
    synthetic_batch,
)

PUBLISHED = {
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
}
# small, with GQA (8 query heads share 2 kv heads) and an odd-sized vocab: fast to build
SMALL_GQA = LlamaConfig("small-gqa", 100, 64, 2, 8, 2, 96, 64, 1e-5, 10000.0)


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: these models are tiny, and on a loaded 2-core machine two spinning
    OpenMP threads made the training test 20x slower (17 s instead of 0.8 s, measured)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # parameters() counts a tied weight once


# ---------------------------------------------------------------- configs
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_num_params_matches_published_checkpoint(name: str) -> None:
    """Catches a wrong count: GQA's smaller wk/wv, the untied head, or the 2L+1 norms forgotten."""
    cfg = LlamaConfig.from_preset(name)
    assert cfg.num_params() == PUBLISHED[name]
    assert sum(cfg.param_counts().values()) == cfg.num_params()
    assert set(cfg.param_counts()) == {"embedding", "attention", "mlp", "norms", "head"}


@pytest.mark.parametrize("cfg", [LlamaConfig.from_preset("tiny"), SMALL_GQA], ids=lambda c: c.name)
def test_num_params_equals_module_parameters(cfg: LlamaConfig) -> None:
    """Catches the formula and the module drifting apart (a bias, a missing norm, wk of size h)."""
    assert cfg.num_params() == n_params(Llama(cfg))


def test_tied_embeddings_counted_once() -> None:
    """Catches tie_embeddings counting the head twice, or the module not actually sharing it."""
    cfg = LlamaConfig("tied", 100, 64, 1, 4, 4, 96, 64, 1e-5, 1e4, tie_embeddings=True)
    model = Llama(cfg)
    assert model.head.weight is model.embed.weight
    assert cfg.param_counts()["head"] == 0 and cfg.num_params() == n_params(model)


def test_presets_and_derived_widths() -> None:
    """Catches a preset missing from the table or head_dim/kv_hidden derived the wrong way."""
    assert set(PUBLISHED) | {"tiny"} <= set(preset_names())
    cfg = LlamaConfig.from_preset("llama-3-8b")
    assert (cfg.head_dim, cfg.kv_hidden, cfg.vocab_size, cfg.rope_theta) == (128, 1024, 128256, 5e5)
    assert LlamaConfig.from_preset("llama-2-7b").rope_theta == 10000.0


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(hidden=100, heads=3, kv_heads=3), "hidden=100 is not divisible by heads=3"),
        (dict(hidden=64, heads=4, kv_heads=3), "heads=4 is not divisible by kv_heads=3"),
        (dict(layers=0), "layers must be an integer >= 1, got 0"),
        (dict(vocab_size=-1), "vocab_size must be an integer >= 1"),
        (dict(hidden=12, heads=4, kv_heads=4), "head_dim=3 must be even"),
        (dict(norm_eps=0.0), "norm_eps must be a number > 0"),
    ],
)
def test_invalid_config_raises_naming_the_constraint(changes: dict, message: str) -> None:
    """Catches a silently accepted impossible shape (it would fail later, far from the cause)."""
    args = dict(name="bad", vocab_size=10, hidden=64, layers=1, heads=4, kv_heads=2)
    args |= dict(ffn_hidden=96, max_seq_len=16, norm_eps=1e-5, rope_theta=1e4) | changes
    with pytest.raises(ValueError, match=message):
        LlamaConfig(**args)


def test_unknown_preset_lists_valid_names() -> None:
    """Catches a KeyError (or a bare message) where a reader needs the list of valid names."""
    with pytest.raises(ValueError, match="llama-2-7b.*tiny"):
        LlamaConfig.from_preset("llama-9-1t")


# ---------------------------------------------------------------- model
def test_forward_shape_and_submodule_names() -> None:
    """Catches renamed submodules (later labs wrap them by name) and a wrong logits shape."""
    cfg = SMALL_GQA
    model = Llama(cfg)
    logits = model(torch.randint(0, cfg.vocab_size, (3, 17)))
    assert logits.shape == (3, 17, cfg.vocab_size)
    names = dict(model.named_modules())
    for name in ["embed", "norm", "head", "layers.1.attn_norm", "layers.1.mlp_norm"]:
        assert name in names
    for name in ["wq", "wk", "wv", "wo", "core"]:
        assert f"layers.0.attn.{name}" in names
    for name in ["w1", "w2", "w3"]:
        assert f"layers.0.mlp.{name}" in names
    assert type(names["layers.0.attn.core"]).__name__ == "AttentionCore"
    assert names["layers.0.attn.wk"].weight.shape == (cfg.kv_hidden, cfg.hidden)
    assert all(not n.endswith("bias") for n, _ in model.named_parameters())


def test_causal_future_tokens_do_not_change_past_logits() -> None:
    """Catches a missing or transposed causal mask (the model would see the answer)."""
    torch.manual_seed(0)
    model = Llama(SMALL_GQA)
    tokens = torch.randint(0, SMALL_GQA.vocab_size, (2, 12))
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % SMALL_GQA.vocab_size
    a, b = model(tokens), model(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7])
    assert not torch.allclose(a[:, 7:], b[:, 7:])


def test_rope_is_a_rotation_by_relative_position() -> None:
    """Catches wrong RoPE pairing or frequencies: scores must depend on m - n only, norms kept."""
    torch.manual_seed(0)
    d, theta = 16, 10000.0
    cos, sin = rope_tables(32, d, theta)
    q, k = torch.randn(d), torch.randn(d)

    def at(x: torch.Tensor, pos: int) -> torch.Tensor:
        x = x.expand(32, d)[None, :, None, :]  # (1, s, 1, d): the same vector at every position
        return apply_rope(x, cos, sin)[0, pos, 0]

    torch.testing.assert_close(at(q, 0), q)  # position 0 is the identity
    torch.testing.assert_close(at(q, 9).norm(), q.norm())  # a rotation keeps the length
    torch.testing.assert_close(at(q, 5) @ at(k, 3), at(q, 12) @ at(k, 10), rtol=1e-4, atol=1e-4)
    assert not torch.allclose(at(q, 5) @ at(k, 3), at(q, 5) @ at(k, 4))


@pytest.mark.parametrize("fused_gqa", [True, False], ids=["enable_gqa", "repeat_interleave"])
def test_attention_core_matches_explicit_softmax_with_gqa(fused_gqa: bool, monkeypatch) -> None:
    """Catches GQA pairing query heads with the wrong kv head (in the enable_gqa path and in the
    torch-2.4 copy path, where .repeat instead of .repeat_interleave would), or a wrong scale."""
    monkeypatch.setattr(llama, "SDPA_ENABLE_GQA", fused_gqa and llama.SDPA_ENABLE_GQA)
    torch.manual_seed(0)
    b, heads, kv_heads, s, d = 2, 8, 2, 10, 16
    q, k, v = (
        torch.randn(b, heads, s, d),
        torch.randn(b, kv_heads, s, d),
        torch.randn(b, kv_heads, s, d),
    )
    k_all, v_all = k.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1)  # head i -> kv i//4
    scores = q @ k_all.transpose(-1, -2) / math.sqrt(d)  # (b, H, s, s)
    scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(AttentionCore()(q, k, v), scores.softmax(-1) @ v_all)


def test_init_is_deterministic_and_scaled() -> None:
    """Catches init that ignores the seed (ranks would start from different models) or wrong std."""
    torch.manual_seed(3)
    a = Llama(SMALL_GQA)
    torch.manual_seed(3)
    b = Llama(SMALL_GQA)
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(pa, pb), name
    assert torch.equal(a.norm.weight, torch.ones(SMALL_GQA.hidden))
    assert abs(a.layers[0].mlp.w1.weight.std().item() - 0.02) < 0.002


def test_cross_entropy_ignores_masked_targets() -> None:
    """Catches ignore_index tokens counted in the mean (loss would depend on padding)."""
    logits = torch.randn(2, 5, 7)
    targets = torch.randint(0, 7, (2, 5))
    masked = targets.clone()
    masked[:, 3:] = -100
    expected = F.cross_entropy(logits[:, :3].reshape(-1, 7), targets[:, :3].reshape(-1))
    torch.testing.assert_close(cross_entropy(logits, masked), expected)


def test_tiny_model_learns_markov_data_quickly() -> None:
    """Catches a model or data path that does not learn (detached graph, broken data, bad init)."""
    torch.manual_seed(0)
    cfg = LlamaConfig.from_preset("tiny")
    model = Llama(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    start, losses = time.process_time(), []  # CPU time: wall time on a shared machine varies
    for inputs, targets in SyntheticTokens(cfg.vocab_size, 8, 64, num_batches=30):
        loss = cross_entropy(model(inputs), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > math.log(cfg.vocab_size) - 0.2  # starts near a uniform guess
    assert losses[-1] < losses[0] - 1.5, losses
    assert losses[-1] > markov_entropy(cfg.vocab_size) - 0.1  # cannot beat the entropy floor
    assert time.process_time() - start < 5.0


# ---------------------------------------------------------------- meta, fake, saved tensors
def test_builds_on_meta_device() -> None:
    """Catches state computed eagerly from data (a meta build of a 70B model must allocate nothing)."""
    with torch.device("meta"):
        model = Llama(LlamaConfig.from_preset("llama-2-70b"))
    assert model.head.weight.is_meta and n_params(model) == PUBLISHED["llama-2-70b"]


@own_process
def test_fake_tensor_forward_backward_in_bf16() -> None:
    """Catches .to(dtype) or real-data ops that FakeTensorMode rejects (breaks the 7B memory lab)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with FakeTensorMode():
            model = Llama(SMALL_GQA)
            tokens = torch.randint(0, SMALL_GQA.vocab_size, (2, 64))
            loss = cross_entropy(model(tokens), tokens)
            loss.backward()
            assert model.layers[0].attn.wk.weight.grad.dtype == torch.bfloat16
            assert model.layers[0].attn.wk.weight.grad.shape == (
                SMALL_GQA.kv_hidden,
                SMALL_GQA.hidden,
            )
    finally:
        torch.set_default_dtype(previous)


def saved_bytes(model: Llama, tokens: torch.Tensor) -> tuple[int, list[tuple[int, ...]]]:
    """Bytes of distinct non-parameter storages the forward + loss save for backward, and shapes."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}
    shapes: list[tuple[int, ...]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            storages[ptr] = t.untyped_storage().nbytes()
            shapes.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        cross_entropy(model(tokens), tokens)
    return sum(storages.values()), shapes


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_saved_activations_match_documented_formula(dtype: torch.dtype) -> None:
    """Catches a change that saves more for backward (an s x s score matrix, a copied k/v for GQA,
    an extra fp32 copy) without updating the formula the memory estimator is built from."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        cfg = LlamaConfig.from_preset("tiny")
        b, s = 3, 40
        total, shapes = saved_bytes(Llama(cfg), torch.randint(0, cfg.vocab_size, (b, s)))
    finally:
        torch.set_default_dtype(previous)
    p = dtype.itemsize
    h, kv, f, H, V, d = (
        cfg.hidden,
        cfg.kv_hidden,
        cfg.ffn_hidden,
        cfg.heads,
        cfg.vocab_size,
        cfg.head_dim,
    )
    per_block = p * (8 * b * s * h + 2 * b * s * kv + 4 * b * s * f + 2 * b * s) + 4 * b * H * s
    once = 8 * b * s + 2 * s * d * p + p * (3 * b * s * h + b * s) + 4 * b * s * V + 4
    assert total == cfg.layers * per_block + once
    assert all(shape[-2:] != (s, s) for shape in shapes)  # no attention matrix


# ---------------------------------------------------------------- data
def test_synthetic_batch_shift_range_and_determinism() -> None:
    """Catches targets not shifted by one, out-of-vocab ids, or batches that ignore the seed."""
    x, y = synthetic_batch(256, 4, 32, seed=1)
    assert x.shape == y.shape == (4, 32) and x.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert 0 <= int(x.min()) and int(y.max()) < 256
    assert torch.equal(synthetic_batch(256, 4, 32, seed=1)[0], x)
    assert not torch.equal(synthetic_batch(256, 4, 32, seed=2)[0], x)
    streams = [next(iter(SyntheticTokens(256, 4, 32, stream=r)))[0] for r in (0, 1)]
    assert not torch.equal(*streams)


def test_markov_entropy_is_the_true_chain_loss() -> None:
    """Catches a wrong entropy floor: the true chain's mean loss on samples must equal it."""
    successors, probs, _ = markov_chain(256)
    x, y = synthetic_batch(256, 64, 128, generator=torch.Generator().manual_seed(5))
    p = torch.where(successors[x] == y[..., None], probs[x], 0.0).sum(-1)  # P(y | x)
    assert bool((p > 0).all())  # every transition is one the chain allows
    assert abs(-p.log().mean().item() - markov_entropy(256)) < 0.05
