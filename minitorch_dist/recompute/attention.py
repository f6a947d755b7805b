"""An unfused attention core: the (s x s) matrices that selective recomputation was invented for.

Our Llama's :class:`~minitorch_dist.models.llama.AttentionCore` calls a fused kernel
(FlashAttention, Dao et al. 2022, section 3.1): it never stores the (s x s) scores, and in its
backward it recomputes them from q, k, v and one logsumexp per row. That *is* selective
recomputation, done inside a kernel. To see what Korthikanti et al. 2022 (section 4.1) count --
the attention term 5as^2b that grows with the square of the sequence -- we need attention written
out in matrix products, as GPT-3 and Megatron-LM computed it:

    scores = q k^T / sqrt(d) + causal mask          (b, H, s, s)   not saved (an add saves nothing)
    probs  = softmax(scores)                        (b, H, s, s)   saved by softmax and by probs @ v
    out    = probs v                                (b, H, s, d)

Per layer it stores p·bHs^2 bytes for ``probs`` (Korthikanti's 2as^2b of the softmax output in
16 bits; no dropout here, so no mask and no dropout output: 2as^2b instead of 5as^2b), plus copies
of k and v for every query head (GQA without kernel support: 2p·bsh instead of 2p·bs·kv).
:class:`MathAttentionCore` is a subclass of ``AttentionCore``, so ``selective_policy`` picks it.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from minitorch_dist.checks import check_choice
from minitorch_dist.models.llama import AttentionCore

__all__ = ["MathAttentionCore", "use_attention"]


class MathAttentionCore(AttentionCore):
    """softmax(q k^T / sqrt(d) + causal mask) v with explicit (s x s) matrices (no fused kernel).

    Same interface and result as ``AttentionCore``: q (b, H, s, d), k and v (b, KV, s, d).
    """

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        b, heads, s, d = q.shape
        groups = heads // k.shape[1]
        k = k.repeat_interleave(groups, dim=1)  # (b, H, s, d): a copy per query head
        v = v.repeat_interleave(groups, dim=1)  # (b, H, s, d)
        mask = torch.full((s, s), float("-inf"), dtype=q.dtype, device=q.device).triu(1)  # (s, s)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d) + mask  # (b, H, s, s)
        probs = scores.softmax(dim=-1)  # (b, H, s, s): saved for backward
        return probs @ v  # (b, H, s, s) @ (b, H, s, d) -> (b, H, s, d)


def use_attention(model: nn.Module, kind: str) -> nn.Module:
    """Give every block of a Llama the fused (``"fused"``) or the unfused (``"math"``) attention
    core, in place; returns the model. Cores hold no parameters, so nothing else changes."""
    cores = {"fused": AttentionCore, "math": MathAttentionCore}
    check_choice("kind", kind, cores)
    for block in model.layers:
        block.attn.core = cores[kind]()
    return model
