"""Chapter 3's closed forms: what recomputation stores, in bytes, without running it.

``segment_checkpoint_bytes`` is Chen et al. 2016's chain of equal layers checkpointed in
segments; ``math_attention_extra_bytes`` is what the unfused attention core
(:mod:`~minitorch_dist.recompute.attention`) stores beyond the fused kernel. The measurements
they are held against are in :mod:`~minitorch_dist.recompute.measure`.
"""

from __future__ import annotations

from minitorch_dist.checks import check_int

__all__ = ["math_attention_extra_bytes", "segment_checkpoint_bytes"]


def segment_checkpoint_bytes(
    layers: int, segment: int, *, input_bytes: int, layer_bytes: int
) -> int:
    """Peak stored activations of a chain of ``layers`` equal layers checkpointed in segments of
    ``segment`` consecutive layers (Chen et al. 2016, section 4).

    Each of the ceil(n / k) segments keeps its input (``input_bytes``) until the backward pass
    reaches it; the backward then recomputes one segment at a time, so the k layers of one segment
    hold their full activations (``layer_bytes`` each) on top: ceil(n / k) x input + k x layer.
    The sum is smallest near k = sqrt(n x input / layer): O(sqrt(n)) memory when a layer's
    activations are as small as its input, and k = 1 (checkpoint every layer) when they are many
    times larger, as in a transformer block.
    """
    check_int("layers", layers)
    check_int("segment", segment)
    if segment > layers:
        raise ValueError(f"segment={segment} is longer than the chain of {layers} layers")
    if input_bytes < 0 or layer_bytes < 0:
        raise ValueError("input_bytes and layer_bytes must be >= 0")
    return -(-layers // segment) * input_bytes + segment * layer_bytes


def math_attention_extra_bytes(
    config: object, *, seq_len: int, micro_batch: int, dtype_bytes: int = 2
) -> int:
    """Bytes the unfused core stores beyond the fused one, for the whole model (recompute none).

    Per layer: + p·bHs^2 (probs) + 2p·bs·h (k and v copied to all H heads) - 2p·bs·kv (the fused
    kernel's k and v, now freed after the copy) - 4bHs (the fused kernel's fp32 logsumexp).
    """
    check_int("seq_len", seq_len)
    check_int("micro_batch", micro_batch)
    check_int("dtype_bytes", dtype_bytes)
    s, b, p = seq_len, micro_batch, dtype_bytes
    h, kv, heads = config.hidden, config.kv_hidden, config.heads  # type: ignore[attr-defined]
    per_layer = p * b * heads * s * s + 2 * p * b * s * (h - kv) - 4 * b * heads * s
    return config.layers * per_layer  # type: ignore[attr-defined]
