"""Arithmetic of a training run: FLOPs per token, model FLOPs utilisation, days to train.

A matrix product of a token's ``k``-vector with a ``k x n`` weight is ``2 k n`` FLOPs (a multiply
and an add per weight). The backward pass computes two products for each one of the forward (the
gradient with respect to the input and to the weight), so training costs ``3 x 2 = 6`` FLOPs per
weight per token. Attention adds products whose size depends on the sequence: for each token and
layer, ``q k^T`` against ``s`` keys and the weighted sum of ``s`` values are ``2 s h_q`` FLOPs
each (``h_q`` = heads x head_dim), ``4 s h_q`` forward and ``12 s h_q`` for training, counted for
the full ``s x s`` matrix as is the convention, though causal attention needs half of it. In all

    model FLOPs per token  = 6 N + 12 L s h_q         N = the parameters of matrix products
    with full recompute    = 8 N + 16 L s h_q         (the forward runs twice)

which are Narayanan et al. 2021's per-iteration counts, ``72 B s L h^2 (1 + s / 6h + ...)`` without
and ``96 B s L h^2 (...)`` with recomputation, divided by the ``B s`` tokens of a batch (section
5.1, for GPT with ``N = 12 L h^2`` plus the head). The *model FLOPs utilisation* (MFU) is the
model FLOPs a run achieves per second over the device's peak; recomputation does not count as
useful work. And a run of ``T`` tokens on ``n`` devices that each sustain ``X`` FLOP/s takes
``T x flops_per_token / (n X)`` seconds: Narayanan's ``8 T P / (n X)`` with recomputation.
"""

from __future__ import annotations

from typing import Any

from minitorch_dist.checks import check_choice, check_int, check_positive

__all__ = ["flops_per_token", "matmul_params", "mfu", "training_seconds"]

SECONDS_PER_DAY = 86_400


def matmul_params(config: Any) -> int:
    """Parameters that take part in matrix products: all but the input embedding (a lookup) and
    the norms (elementwise). The output head is a product and counts."""
    counts = config.param_counts()
    return config.num_params() - counts["embedding"] - counts["norms"]


def flops_per_token(config: Any, *, seq_len: int, recompute: str = "none") -> int:
    """Training FLOPs per token of a Llama ``config`` at sequence length ``seq_len``:
    ``6 N + 12 L s h_q``, or ``8 N + 16 L s h_q`` with ``recompute="full"`` (module docstring)."""
    check_int("seq_len", seq_len)
    check_choice("recompute", recompute, ("none", "full"))
    passes = 4 if recompute == "full" else 3  # forward, backward (2x), forward again
    attention = 4 * config.layers * seq_len * config.heads * config.head_dim
    return passes * (2 * matmul_params(config) + attention)


def mfu(tokens_per_second: float, flops_per_token: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: model FLOPs done per second over the device's peak FLOP/s
    (pass the *model* FLOPs per token, without recomputation, and the peak of all devices)."""
    check_positive("tokens_per_second", tokens_per_second)
    check_positive("flops_per_token", flops_per_token)
    check_positive("peak_flops", peak_flops)
    return tokens_per_second * flops_per_token / peak_flops


def training_seconds(
    tokens: float, flops_per_token: float, *, devices: int, flops_per_device: float
) -> float:
    """Seconds to train on ``tokens`` when each of ``devices`` sustains ``flops_per_device``."""
    check_int("devices", devices)
    check_positive("tokens", tokens)
    check_positive("flops_per_token", flops_per_token)
    check_positive("flops_per_device", flops_per_device)
    return tokens * flops_per_token / (devices * flops_per_device)
