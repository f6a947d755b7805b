"""Synthetic token data made in code: samples of a fixed random first-order Markov chain.

The labs need data that (1) needs no download, (2) is reproducible from a seed, (3) is learnable
fast enough that a few dozen optimizer steps on the tiny Llama visibly lower the loss, and
(4) has a known best possible loss, so a plot can show the loss approaching a floor.

A first-order Markov chain over ``vocab_size`` tokens gives all four. Each token ``i`` may be
followed by ``branching`` distinct successors, drawn at random, with probabilities drawn from a flat
Dirichlet(1). Sequences start from the chain's stationary distribution pi, so every position is
distributed alike and the expected next-token loss of the best possible model is the chain's
entropy rate (Cover & Thomas, "Elements of Information Theory", section 4.2):

    H = sum_i pi_i * H(P_i) = - sum_i pi_i sum_j P_ij log P_ij      (nats per token)

:func:`markov_entropy` returns H. For the default ``branching=8``, H is about 1.7 nats, against
log(256) = 5.55 nats for a uniform guess over the tiny model's 256 tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import torch


@lru_cache(maxsize=8)
def markov_chain(
    vocab_size: int, seed: int = 0, branching: int = 8
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The chain fixed by ``seed``: successors (V, k) int64, probs (V, k), stationary pi (V,).

    ``successors[i]`` are the k distinct tokens that may follow token i, ``probs[i]`` their
    probabilities (each row sums to 1). Cached: every call with the same arguments returns the
    same tensors, so do not modify them.
    """
    if not 1 <= branching <= vocab_size:
        raise ValueError(f"branching must be in [1, vocab_size={vocab_size}], got {branching}")
    g = torch.Generator().manual_seed(seed)
    # k distinct successors per row: draw with replacement, redraw the rows that repeat a token.
    successors = torch.randint(vocab_size, (vocab_size, branching), generator=g)  # (V, k)
    if 2 * branching > vocab_size:  # dense chain: redrawing would rarely succeed; permute instead
        successors = torch.rand(vocab_size, vocab_size, generator=g).argsort(-1)[:, :branching]
    while True:
        ordered = successors.sort(-1).values
        bad = (ordered[:, 1:] == ordered[:, :-1]).any(-1).nonzero().flatten()  # rows with repeats
        if bad.numel() == 0:
            break
        successors[bad] = torch.randint(vocab_size, (bad.numel(), branching), generator=g)
    weights = -torch.rand(vocab_size, branching, generator=g, dtype=torch.float64).log()  # Exp(1)
    probs = weights / weights.sum(-1, keepdim=True)  # (V, k): a flat Dirichlet sample per row
    # Stationary distribution by power iteration on the lazy chain (I + P) / 2: same pi as P,
    # but it converges even when P is periodic.
    pi = torch.full((vocab_size,), 1.0 / vocab_size, dtype=torch.float64)
    for _ in range(10_000):
        step = torch.zeros_like(pi).index_add_(
            0, successors.flatten(), (pi[:, None] * probs).flatten()
        )
        new = 0.5 * (pi + step)  # (V,)
        converged = (new - pi).abs().sum() < 1e-12
        pi = new
        if converged:
            break
    return successors, probs.float(), (pi / pi.sum()).float()


def markov_entropy(vocab_size: int, seed: int = 0, branching: int = 8) -> float:
    """Entropy rate H of the chain in nats per token: the lowest expected cross-entropy loss."""
    _, probs, pi = markov_chain(vocab_size, seed, branching)
    p = probs.double()
    return float(-(pi.double() * (p * p.log()).sum(-1)).sum())


def synthetic_batch(
    vocab_size: int,
    batch: int,
    seq_len: int,
    *,
    seed: int = 0,
    generator: torch.Generator | None = None,
    branching: int = 8,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch ``(inputs, targets)``, each (batch, seq_len) int64; targets = inputs shifted by one.

    ``seed`` fixes the chain (the "language"); ``generator`` draws the sequences. Without a
    generator the batch is a pure function of ``seed`` (sampled from a generator seeded with
    ``seed + 1``); pass one generator across calls to get a stream of fresh batches.
    """
    successors, probs, pi = markov_chain(vocab_size, seed, branching)
    if generator is None:
        generator = torch.Generator().manual_seed(seed + 1)
    seq = torch.empty(batch, seq_len + 1, dtype=torch.long)
    seq[:, 0] = torch.multinomial(pi, batch, replacement=True, generator=generator)  # x_0 ~ pi
    for t in range(seq_len):
        prev = seq[:, t]  # (batch,)
        pick = torch.multinomial(probs[prev], 1, generator=generator)  # (batch, 1)
        seq[:, t + 1] = successors[prev].gather(1, pick).squeeze(1)  # x_{t+1} ~ P[x_t]
    return seq[:, :-1], seq[:, 1:]


class SyntheticTokens:
    """An iterable of ``(inputs, targets)`` batches from one Markov chain.

    ``stream`` picks an independent sequence of batches from the same chain (e.g. one stream per
    data-parallel rank); the same ``(seed, stream)`` always yields the same batches.
    ``num_batches=None`` iterates forever.
    """

    def __init__(
        self,
        vocab_size: int,
        batch: int,
        seq_len: int,
        *,
        seed: int = 0,
        stream: int = 0,
        num_batches: int | None = None,
        branching: int = 8,
    ) -> None:
        self.vocab_size, self.batch, self.seq_len = vocab_size, batch, seq_len
        self.seed, self.stream, self.num_batches, self.branching = (
            seed,
            stream,
            num_batches,
            branching,
        )

    def entropy(self) -> float:
        """The loss floor: :func:`markov_entropy` of this chain."""
        return markov_entropy(self.vocab_size, self.seed, self.branching)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        g = torch.Generator().manual_seed(1_000_003 * (self.seed + 1) + self.stream)
        i = 0
        while self.num_batches is None or i < self.num_batches:
            yield synthetic_batch(
                self.vocab_size,
                self.batch,
                self.seq_len,
                seed=self.seed,
                generator=g,
                branching=self.branching,
            )
            i += 1

    def __len__(self) -> int:
        if self.num_batches is None:
            raise TypeError("an endless SyntheticTokens (num_batches=None) has no len()")
        return self.num_batches
