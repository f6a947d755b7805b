"""Rotary position embeddings (RoPE, Su et al. 2021, "RoFormer") for the tiny Llama: the cos and
sin tables and the rotation. The tables are computed on every call, never stored, so the model
holds nothing but parameters; :meth:`Llama.rope_at` picks the rows of the tokens it holds.
"""

from __future__ import annotations

import torch

from minitorch_dist.models.configs import LlamaConfig

__all__ = ["apply_rope", "rope_for", "rope_tables"]


def rope_tables(
    seq_len: int, head_dim: int, theta: float, device: torch.device | str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles m * theta^(-2i/d), each (seq_len, head_dim), in fp32.

    Angle i is used by the dimension pair (i, i + d/2) -- the "rotate half" layout of the Hugging
    Face Llama port; Meta's reference pairs (2i, 2i+1) instead. Both are RoPE (Su et al. 2021).
    """
    inv_freq = theta ** (
        -torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim
    )
    pos = torch.arange(seq_len, device=device, dtype=torch.float32)  # (s,)
    angles = torch.outer(pos, inv_freq)  # (s, d/2)
    angles = torch.cat([angles, angles], dim=-1)  # (s, d)
    return angles.cos(), angles.sin()


def rope_for(
    config: LlamaConfig, seq_len: int, device: torch.device | str | None, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE's cos and sin for a model of ``config``, (seq_len, head_dim) each, in ``dtype``.

    Computed from the sequence length on every call (no buffer), so every pipeline stage makes
    its own from the activations it receives and the model holds nothing but parameters.
    """
    if seq_len > config.max_seq_len:
        raise ValueError(f"sequence length {seq_len} exceeds max_seq_len={config.max_seq_len}")
    cos, sin = rope_tables(seq_len, config.head_dim, config.rope_theta, device)
    return cos.to(dtype), sin.to(dtype)  # (s, d) each


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x_i, x_{i+d/2}) of ``x`` (b, s, heads, d) by its position's angle."""
    x1, x2 = x.chunk(2, dim=-1)  # (b, s, heads, d/2) each
    rotated = torch.cat([-x2, x1], dim=-1)  # (b, s, heads, d)
    cos, sin = cos[:, None, :], sin[:, None, :]  # (s, 1, d): broadcast over heads
    return x * cos + rotated * sin  # (b, s, heads, d)
