"""Hybrid sharding (HSDP) in closed form: ZeRO inside a shard group, replicas across groups.

PyTorch FSDP's hybrid sharding (Zhao et al. 2023, section 3.2.2) shards the model states over a
group of ``g`` ranks (a node, where the all-gathers and reduce-scatters run on NVLink) and
replicates that sharded group ``r = d / g`` times; after the shard group's reduce-scatter the
ranks holding the same shard all-reduce it across the replicas. With ``S`` the bytes of the
16-bit gradients (or parameters) of the model and ``m`` micro-batches per step, one rank sends

    zero_comm_bytes(S, stage, g, grad_acc=m) + 2 (r - 1) / r * ceil(Psi / g) * bytes

the first term chapter 6's ZeRO traffic over the shard group, the second one all-reduce of the
gradient shard per step (the accumulated shard, after the last micro-batch), and holds the ZeRO
states of a ``1 / g`` shard. One all-reduce per step holds only when the cross-replica
all-reduce is deferred to the last micro-batch (FSDP2's ``set_requires_all_reduce(False)`` on
the others); a framework that all-reduces after every micro-batch's reduce-scatter sends ``m``
times the second term (``defer=False``): 16 ceil(Psi / g) bytes per parameter under ZeRO-3 with mixed-precision
Adam. With ``g = d`` (one replica) both are plain ZeRO's. Arithmetic only (no torch).
"""

from __future__ import annotations

from fractions import Fraction

from minitorch_dist.checks import check_choice, check_int

from .memo import zero_comm_bytes

__all__ = ["replica_all_reduce_bytes", "hsdp_comm_bytes"]


def replica_all_reduce_bytes(
    num_params: int, dp: int, shard: int, bytes_per_param: int = 2, *, reduces: int = 1
) -> int | float:
    """Bytes one rank sends in ``reduces`` all-reduces of its gradient shard, ``ceil(Psi / g)``
    elements, over the ``r = dp / shard`` replicas: ``2 (r - 1) / r`` of it each (ring); 0 with
    one replica. One per step when the all-reduce is deferred to the last micro-batch, ``m``
    when it follows every micro-batch's reduce-scatter."""
    check_int("num_params", num_params, minimum=0)
    check_int("reduces", reduces)
    check_int("shard", shard)
    check_int("dp", dp)
    if dp % shard:
        raise ValueError(f"shard={shard} does not divide dp={dp} (HSDP's shard group)")
    r = dp // shard
    sent = Fraction(2 * (r - 1) * bytes_per_param * -(-num_params // shard) * reduces, r)
    return int(sent) if sent.denominator == 1 else float(sent)


def hsdp_comm_bytes(
    num_params: int,
    stage: int,
    dp: int,
    shard: int,
    *,
    grad_acc: int = 1,
    bytes_per_param: int = 2,
    defer: bool = True,
) -> int | float:
    """Bytes one rank sends per step under ZeRO stage ``stage`` sharded over ``shard`` of the
    ``dp`` ranks: the shard group's ZeRO traffic plus the replicas' all-reduce of the shard, once
    per step (``defer=True``, deferred to the last micro-batch) or per micro-batch."""
    check_choice("stage", stage, (1, 2, 3))
    within = zero_comm_bytes(num_params, stage, shard, bytes_per_param, grad_acc=grad_acc)
    reduces = 1 if defer else grad_acc
    return within + replica_all_reduce_bytes(
        num_params, dp, shard, bytes_per_param, reduces=reduces
    )
