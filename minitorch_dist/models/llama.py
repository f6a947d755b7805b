"""A small Llama: the decoder every lab trains, built from a :class:`LlamaConfig`.

Same architecture as Llama 2 (Touvron et al. 2023) and Llama 3 (Dubey et al. 2024), at any size:
pre-norm blocks with RMSNorm, rotary position embeddings (RoPE, Su et al. 2021, "RoFormer"),
grouped-query attention (GQA, Ainslie et al. 2023), a SwiGLU MLP (Shazeer 2020), an untied output
head and no biases. Submodule names are part of the contract, because later labs wrap them:

    model.embed                      nn.Embedding(V, h)
    model.layers[i]                  Block
        .attn_norm, .mlp_norm        RMSNorm(h)
        .attn                        Attention: wq, wk, wv, wo (Linear, no bias) and
        .attn.core                   AttentionCore: softmax(q k^T / sqrt(d)) v, causal (what
                                     selective recomputation wraps)
        .mlp                         SwiGLU: w1 (gate), w3 (up), w2 (down)
    model.norm                       RMSNorm(h)
    model.head                       nn.Linear(h, V, bias=False)

``forward`` is the composition of four pieces, ``embed_tokens`` -> ``rope`` -> ``run_blocks`` ->
``output`` (final norm + head), so that a pipeline stage (:mod:`minitorch_dist.models.stage`) runs
any contiguous slice of blocks on the same submodules, the first stage with the embedding and the
last with the head. RoPE's cos/sin tables are computed from the sequence length on each call (once
per forward, shared by all blocks) rather than stored as buffers, so the model holds no state
besides its parameters: it builds under ``torch.device("meta")`` and under ``FakeTensorMode`` with
``torch.set_default_dtype(...)``.

What the forward saves for backward (measured with ``torch.autograd.graph.saved_tensors_hooks``
on CPU, fp32 and bf16, tiny preset; tensors that share a storage counted once; parameters not
counted). b=batch, s=seq_len, h=hidden, kv=kv_hidden, f=ffn_hidden, H=heads, V=vocab_size,
d=head_dim, p=bytes per activation element (4 in fp32, 2 in bf16). Per block:

    attn_norm   its input x (b,s,h), x*rstd (b,s,h), rstd (b,s,1)         2bsh + bs
    wq, wk, wv  their one shared input, the norm's output (b,s,h)          bsh
    attn.core   q (b,s,h), k (b,s,kv), v (b,s,kv) after RoPE, out (b,s,h)   2bsh + 2bs*kv
                and the softmax logsumexp (b,H,s), always fp32             + 4*bHs bytes
    wo          its input is a view of core's out: nothing new             0
    mlp_norm    its input (b,s,h), x*rstd (b,s,h), rstd (b,s,1)            2bsh + bs
    w1, w3      their one shared input, the norm's output (b,s,h)          bsh
    SwiGLU      gate g = w1(x), silu(g), up u = w3(x), silu(g)*u (w2's      4bsf
                input), each (b,s,f)

    bytes per block = p * (8bsh + 2bs*kv + 4bsf + 2bs) + 4bHs

Once per forward: the token ids (b,s) int64 (8bs bytes, saved by the embedding); RoPE's cos and
sin, (s,d) each (2sd*p); the final norm (2bsh + bs)*p and the head's input bsh*p.
:func:`cross_entropy` saves log_softmax's output (b,s,V) in fp32 (4bsV bytes), plus the targets.
tests/test_models.py checks this formula against a measurement. No (s, s) attention matrix is
saved: on CPU, ``F.scaled_dot_product_attention(..., is_causal=True)`` runs the fused flash kernel
(``_scaled_dot_product_flash_attention_for_cpu``), which keeps one logsumexp per row instead, and
``enable_gqa=True`` lets it read the kv heads without copying them to all H heads.

On CUDA (measured on an H100, torch 2.11, same tiny model): in bf16 the cuDNN kernel saves the
same list (lse as (b,H,s,1) fp32) plus two int64 RNG scalars, 32 bytes per forward in all. In fp32
no fused kernel takes GQA, so k and v are copied to all H heads first (the core saves
2bsh instead of 2bs*kv) and the memory-efficient kernel pads lse to (b,H,ceil(s/32)*32).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from minitorch_dist.models.configs import LlamaConfig
from minitorch_dist.models.rope import apply_rope, rope_for, rope_tables

__all__ = [
    "Attention",
    "AttentionCore",
    "Block",
    "Llama",
    "RMSNorm",
    "SwiGLU",
    "apply_rope",
    "cross_entropy",
    "rope_for",
    "rope_tables",
]


def _sdpa_has_enable_gqa() -> bool:
    """``enable_gqa=`` arrived in torch 2.5; our floor is 2.4, so detect it once at import."""
    try:
        q, kv = torch.zeros(1, 2, 1, 2), torch.zeros(1, 1, 1, 2)
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        return True
    except TypeError:
        return False


SDPA_ENABLE_GQA = _sdpa_has_enable_gqa()
_HALF = (torch.float16, torch.bfloat16)


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * weight  (Zhang & Sennrich 2019; Llama's only norm).

    Computed in the input's dtype: the Hugging Face port upcasts to fp32 first, which would save
    an extra fp32 copy of x per norm for backward in a 16-bit model.
    """

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)  # (b, s, 1)
        return (x * rstd) * self.weight  # (b, s, h)


class AttentionCore(nn.Module):
    """softmax(q k^T / sqrt(d) + causal mask) v, fused: no (s, s) matrix is stored.

    Inputs are laid out (b, heads, s, d) for q and (b, kv_heads, s, d) for k and v; the output is
    (b, heads, s, d). This is the part that Korthikanti et al. 2022 recompute in "selective"
    activation recomputation, so it is its own module for a policy to wrap.
    """

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        groups = q.shape[1] // k.shape[1]
        if groups == 1:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, H, s, d)
        # enable_gqa only where a fused kernel takes it: CPU flash (fp32 and 16-bit), CUDA flash and
        # cuDNN (16-bit). CUDA fp32 + enable_gqa falls back to the math kernel, which saves the
        # (b, H, s, s) probabilities (measured, torch 2.11 on an H100); copying k and v is cheaper.
        if SDPA_ENABLE_GQA and (q.device.type != "cuda" or q.dtype in _HALF):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        # Otherwise share each k/v head with `groups` query heads by copying it (costs memory).
        k = k.repeat_interleave(groups, dim=1)  # (b, H, s, d)
        v = v.repeat_interleave(groups, dim=1)  # (b, H, s, d)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Attention(nn.Module):
    """Causal self-attention with RoPE and grouped-query attention (Ainslie et al. 2023)."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = config.heads, config.kv_heads, config.head_dim
        h, kv = config.hidden, config.kv_hidden
        self.wq = nn.Linear(h, h, bias=False)
        self.wk = nn.Linear(h, kv, bias=False)
        self.wv = nn.Linear(h, kv, bias=False)
        self.wo = nn.Linear(h, h, bias=False)
        self.core = AttentionCore()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        # -1, not self.heads: a column-parallel wq/wk/wv whose out_features are a 1/tp slice of
        # whole heads yields the local heads here without Attention knowing about tp.
        q = self.wq(x).view(b, s, -1, self.head_dim)  # (b, s, H, d)
        k = self.wk(x).view(b, s, -1, self.head_dim)  # (b, s, KV, d)
        v = self.wv(x).view(b, s, -1, self.head_dim)  # (b, s, KV, d)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        # transpose is a view: SDPA reads the (b, s, H, d) memory as (b, H, s, d) without a copy
        out = self.core(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))  # (b, H, s, d)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))  # (b, s, h)


class SwiGLU(nn.Module):
    """w2(silu(w1 x) * w3 x): the gated MLP of Shazeer 2020, with intermediate width f."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(config.hidden, config.ffn_hidden, bias=False)  # gate
        self.w3 = nn.Linear(config.hidden, config.ffn_hidden, bias=False)  # up
        self.w2 = nn.Linear(config.ffn_hidden, config.hidden, bias=False)  # down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (b, s, f) -> (b, s, h)


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(config.hidden, config.norm_eps)
        self.attn = Attention(config)
        self.mlp_norm = RMSNorm(config.hidden, config.norm_eps)
        self.mlp = SwiGLU(config)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)  # (b, s, h)
        return x + self.mlp(self.mlp_norm(x))  # (b, s, h)


class Llama(nn.Module):
    """Token ids (b, s) -> next-token logits (b, s, vocab_size).

    Two hooks let the transforms change what the forward sees without a subclass: ``positions``
    (None, or ``positions(length) -> (seq_len, index)``: see :meth:`rope_at`; context
    parallelism sets it) and ``sequence_shards`` (sequence parallelism over t ranks sets t: the
    hidden states between blocks then hold 1/t of the tokens attention sees).
    """

    positions: Callable[[int], tuple[int, torch.Tensor]] | None = None
    sequence_shards: int = 1

    def __init__(self, config: LlamaConfig, *, init_std: float = 0.02) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.hidden)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = RMSNorm(config.hidden, config.norm_eps)
        self.head = nn.Linear(config.hidden, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.head.weight = self.embed.weight
        self.init_weights(std=init_std)

    @torch.no_grad()
    def init_weights(self, std: float = 0.02) -> None:
        """N(0, std) for every Linear and the embedding, ones for norms; same seed, same model.

        To materialise a model built on "meta": ``to_empty(device=...)``, seed, ``init_weights()``.
        That equals seeding then calling ``init_weights()`` on a real model, but not ``Llama(cfg)``
        built after the same seed: a real build's nn.Linear constructors draw from the RNG first.
        """
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=std)
            elif isinstance(module, RMSNorm):
                nn.init.ones_(module.weight)

    # The forward in four pieces, so that a pipeline stage (models/stage.py) can run any slice of
    # them on the same submodules; forward is their composition and nothing else.
    def embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token ids (b, s) -> hidden states (b, s, h): what the first pipeline stage runs first."""
        return self.embed(tokens)  # (b, s, h)

    def rope(
        self, seq_len: int, device: torch.device | str | None, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """RoPE's cos and sin, (seq_len, head_dim) each in ``dtype``: see :func:`rope_for`."""
        return rope_for(self.config, seq_len, device, dtype)

    def rope_at(
        self, length: int, device: torch.device | str | None, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin, (length, head_dim) each, for the ``length`` tokens attention sees here.

        Without a :attr:`positions` hook they are tokens 0 .. length - 1. A hook
        ``positions(length) -> (seq_len, index)`` says that they are the tokens ``index``
        (a (length,) integer tensor) of a sequence of ``seq_len``: the tables are made for the
        whole sequence and indexed, once per forward (context parallelism sets one)."""
        if self.positions is None:
            return self.rope(length, device, dtype)  # (s, d) each
        seq_len, index = self.positions(length)
        cos, sin = self.rope(seq_len, device, dtype)  # (s_whole, d) each
        index = index.to(device)
        return cos[index], sin[index]  # (length, d) each

    def run_blocks(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        layers: slice | range | None = None,
    ) -> torch.Tensor:
        """Run the contiguous blocks ``layers`` (a slice or range of indices; default all)."""
        blocks = self.layers if layers is None else self.layers[layers.start : layers.stop]
        for block in blocks:
            x = block(x, cos, sin)  # (b, s, h)
        return x

    def output(self, x: torch.Tensor) -> torch.Tensor:
        """Final norm and head, (b, s, h) -> logits (b, s, V): what the last stage runs last."""
        return self.head(self.norm(x))  # (b, s, V)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids (b, s) -> logits (b, s, V): the model's one forward. A part of the model
        whose ``embed`` is None (a later pipeline stage) takes hidden states (b, s, h) instead,
        one whose ``head`` is None returns them."""
        # the tokens attention sees: the ids, or what arrives times the sequence-parallel shards
        length = x.shape[1] if self.embed is not None else x.shape[1] * self.sequence_shards
        if self.embed is not None:
            x = self.embed_tokens(x)  # (b, s, h)
        cos, sin = self.rope_at(length, x.device, x.dtype)  # once, shared by every block
        x = self.run_blocks(x, cos, sin)  # (b, s, h)
        return x if self.head is None else self.output(x)  # (b, s, V)


def cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100
) -> torch.Tensor:
    """Mean next-token loss over the targets that are not ``ignore_index``.

    ``logits`` (b, s, V), ``targets`` (b, s). Computed in fp32 whatever the logits' dtype, because
    log-softmax over a large vocabulary loses most of its precision in 16 bits.
    """
    flat = logits.reshape(-1, logits.shape[-1]).float()  # (b*s, V)
    return F.cross_entropy(flat, targets.reshape(-1), ignore_index=ignore_index)
