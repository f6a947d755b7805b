"""Closed forms of pipeline parallelism: the bubble, the first stage's activations, p2p bytes.

With ``p`` stages, ``m`` micro-batches and ``t = t_F + t_B`` the time one micro-batch spends on one
rank, GPipe and 1F1B both take ``(m + p - 1) t``: ``m t`` of work and ``(p - 1) t`` of bubble,
the fill and drain of the pipeline (Huang et al. 2019, section 2.3; Narayanan et al. 2021,
section 2.2.1). The bubble over the ideal time is ``(p - 1) / m``; its share of the step is
``(p - 1) / (m + p - 1)``. Interleaving ``v`` chunks per rank cuts each fill step to ``t / v``:
bubble ``(p - 1) / (v m)`` (Narayanan et al. 2021, section 2.2.2), at the price of more
point-to-point messages and more activations alive on the first stage.

Nothing here imports torch: the numbers stay free of the runtime.
"""

from __future__ import annotations

from minitorch_dist.checks import check_bool, check_int

__all__ = ["bubble_fraction", "bubble_share", "first_stage_activation_factor", "p2p_bytes"]


def bubble_fraction(pp: int, micro_batches: int, virtual_stages: int = 1) -> float:
    """Idle time over ideal time, ``(p - 1) / (v m)``: GPipe and 1F1B (``v = 1``) and Megatron's
    interleaved 1F1B (Narayanan et al. 2021, section 2.2.2)."""
    check_int("pp", pp)
    check_int("micro_batches", micro_batches)
    check_int("virtual_stages", virtual_stages)
    return (pp - 1) / (virtual_stages * micro_batches)


def bubble_share(pp: int, micro_batches: int, virtual_stages: int = 1) -> float:
    """The bubble's share of the whole step, ``(p - 1) / (v m + p - 1)``: idle / (ideal + idle)."""
    check_int("pp", pp)
    check_int("micro_batches", micro_batches)
    check_int("virtual_stages", virtual_stages)
    return (pp - 1) / (virtual_stages * micro_batches + pp - 1)


def first_stage_activation_factor(pp: int, virtual_stages: int) -> float:
    """Activations the first stage keeps under interleaved 1F1B over plain 1F1B's ``p``
    micro-batches: ``1 + (p - 1) / (p v)`` (Korthikanti et al. 2022, section 4.2.3, from the
    warm-up of Narayanan et al. 2021's interleaved schedule, section 2.2.2).

    Where it comes from (Megatron's warm-up): rank 0 runs ``2 (p - 1) + (v - 1) p`` chunk
    forward passes before its first backward, so ``(v + 1) p - 1`` chunk-micro-batches are
    alive at once, each ``1 / v`` of the rank's layers: ``((v + 1) p - 1) / v`` micro-batches'
    worth, against ``p`` for 1F1B. With ``v = 1`` the factor is ``2 - 1/p``, not 1: Megatron's
    interleaved warm-up is longer than 1F1B's even without interleaving.
    """
    check_int("pp", pp)
    check_int("virtual_stages", virtual_stages)
    return 1 + (pp - 1) / (pp * virtual_stages)


def p2p_bytes(
    *,
    micro_batch: int,
    seq_len: int,
    hidden: int,
    bytes_per_element: int = 2,
    tp: int = 1,
    sp: bool = False,
    scatter_gather: bool = False,
) -> int:
    """Bytes one rank sends across a boundary for one micro-batch in one direction: the
    activation ``(b, s, h)`` forward, its gradient (the same shape) backward, ``b s h``
    elements. With tensor parallelism and sequence parallelism each TP rank sends only its
    ``s / t`` slice (Korthikanti et al. 2022, section 4.2.3). Without SP every TP rank holds the
    whole activation and sends it, unless ``scatter_gather``: each rank then sends its ``1 / t``
    slice and the next stage all-gathers the slices over its TP group (Narayanan et al. 2021,
    section 4.1; Megatron-LM's default before Megatron Core, which relies on SP instead)."""
    check_int("micro_batch", micro_batch)
    check_int("seq_len", seq_len)
    check_int("hidden", hidden)
    check_int("bytes_per_element", bytes_per_element)
    check_int("tp", tp)
    check_bool("sp", sp)
    check_bool("scatter_gather", scatter_gather)
    elements = micro_batch * seq_len * hidden
    if scatter_gather and not sp:  # the same b s h on every TP rank: each sends its 1 / t
        if elements % tp:
            raise ValueError(f"b*s*h = {elements} is not divisible by tp={tp} (scatter/gather)")
        return elements // tp * bytes_per_element
    if sp:
        if seq_len % tp:
            raise ValueError(
                f"seq_len={seq_len} is not divisible by tp={tp} (sequence parallelism)"
            )
        elements //= tp
    return elements * bytes_per_element
