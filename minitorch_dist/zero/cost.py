"""The bytes a ZeRO rank sends per step, in closed form (chapter 6; the planner of chapter 12).

Standard library only (with :mod:`minitorch_dist.comm.cost`), so the planner and the book's live
widgets run it where torch is absent (:mod:`minitorch_dist.arithmetic`). The measured side, a
step counted on emulated ranks, is :mod:`minitorch_dist.zero.measure`.
"""

from __future__ import annotations

from minitorch_dist.checks import check_choice, check_int
from minitorch_dist.comm.cost import collective_bytes

__all__ = ["zero_bytes", "zero_comm_bytes"]


def zero_bytes(
    num_params: int, stage: int, dp: int, bytes_per_param: int = 2, *, grad_acc: int = 1
) -> float:
    """Bytes each rank sends per step (Rajbhandari et al. 2020, section 7; ring algorithm).

    With S = ``bytes_per_param * num_params`` bytes of gradients or parameters: stage 0
    all-reduces the gradients, 2 (N-1)/N S; stages 1 and 2 reduce-scatter them and all-gather the
    parameters, (N-1)/N S each, the same 2 (N-1)/N S; stage 3 all-gathers the parameters twice
    (forward and backward) and reduce-scatters the gradients: 3 (N-1)/N S, 1.5 times as much.

    With ``grad_acc`` micro-batches per step, stages 0 and 1 accumulate whole gradients locally
    and communicate once; stage 2 keeps only a gradient shard, so it reduce-scatters every
    micro-batch's gradients, (grad_acc + 1) (N-1)/N S; stage 3 gathers and reduce-scatters for
    every micro-batch, 3 grad_acc (N-1)/N S.
    """
    check_choice("stage", stage, (0, 1, 2, 3))
    check_int("grad_acc", grad_acc)
    size = bytes_per_param * num_params
    if stage == 0:
        return collective_bytes("all_reduce", size, dp)
    scatters = grad_acc if stage >= 2 else 1  # reduce-scatters per step
    gathers = {1: 1, 2: 1, 3: 2 * grad_acc}[stage]  # all-gathers of the parameters per step
    return scatters * collective_bytes("reduce_scatter", size, dp) + gathers * collective_bytes(
        "all_gather", size, dp
    )


# The closed form's older name (the naming rule: ``<technique>_bytes``); labs 6 and 11 call it,
# so it is a plain alias and prints no warning.
zero_comm_bytes = zero_bytes
