"""A toy language model with the features that break careless data parallelism.

CS336 assignment 2 tests its DDP on toy models that "deliberately include tied weights and a
frozen parameter"; this one has both, plus a buffer:

* ``head.weight`` *is* ``embed.weight`` (tied): one parameter that receives two gradient
  contributions, which must be all-reduced once, not twice;
* ``frozen`` has ``requires_grad=False``: it gets no gradient and must not be waited for, yet
  every rank must hold the same values (the initial broadcast covers it);
* ``position`` is a buffer drawn at random: it too must come from rank 0.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["TiedToy"]


class TiedToy(nn.Module):
    """Token ids (b, s) -> logits (b, s, vocab): tied embedding and head, a frozen layer."""

    def __init__(self, vocab: int = 32, hidden: int = 16, max_seq_len: int = 16) -> None:
        super().__init__()
        if min(vocab, hidden, max_seq_len) < 1:
            raise ValueError("vocab, hidden and max_seq_len must be >= 1")
        self.embed = nn.Embedding(vocab, hidden)
        self.register_buffer("position", 0.1 * torch.randn(max_seq_len, hidden))
        self.frozen = nn.Linear(hidden, hidden)
        self.frozen.requires_grad_(False)
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied: one Parameter, two uses

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        s = tokens.shape[1]
        x = self.embed(tokens) + self.position[:s]  # (b, s, h)
        x = x + torch.tanh(self.frozen(x))  # (b, s, h)
        x = x + self.down(torch.relu(self.up(x)))  # (b, s, h)
        return self.head(self.norm(x))  # (b, s, vocab)
