"""The model-state formulas of the estimators people already use, by name, beside ours.

Each function returns device bytes per rank for ``num_params`` parameters, as the tool computes
them (read from its source or documentation; none of them counts activations here):

``megatron``
    Megatron-LM's ``theoretical_memory_usage.compute_weight_and_optimizer_memory``:
    18 bytes per parameter (16-bit weights 2, fp32 "main" gradients 4, fp32 master weights and
    Adam's two states 12), or ``6 + 12 / dp`` with the distributed optimizer, which shards only
    the 12.
``deepspeed_zero2``
    DeepSpeed's ``estimate_zero2_model_states_mem_needs`` without offload, as fixed by
    DeepSpeed PR #5099 (2024): ``2 Psi + 18 Psi / N`` (16-bit weights whole; 16-bit and fp32
    gradients, fp32 master weights and Adam states partitioned).
``deepspeed_zero2_before_5099``
    The same function before that fix: ``4 Psi + 16 Psi / N``. It counted the 16-bit gradients
    whole on every rank, which ZeRO-2 partitions (a documented error, DeepSpeed issue #5102).
``deepspeed_zero3``
    DeepSpeed's ``estimate_zero3_model_states_mem_needs`` without offload:
    ``4 x largest_layer + 18 Psi / N`` (every state sharded; one layer's 16-bit weights and
    gradients gathered whole).
``accelerate``
    ``accelerate estimate-memory``'s training figure: four times the model in the chosen dtype
    ("1x for the model, 1x for the gradients, and 2x for the optimizer").
"""

from __future__ import annotations

from minitorch_dist.checks import check_bool, check_choice, check_int

__all__ = ["PEERS", "peer_model_state_bytes"]

PEERS = (
    "megatron",
    "deepspeed_zero2",
    "deepspeed_zero2_before_5099",
    "deepspeed_zero3",
    "accelerate",
)


def peer_model_state_bytes(
    tool: str,
    num_params: int,
    *,
    dp: int = 1,
    distributed_optimizer: bool = False,
    largest_layer_params: int = 0,
    dtype_bytes: int = 2,
) -> int:
    """Device bytes per rank of the model states by ``tool``'s formula (module docstring).
    ``distributed_optimizer`` is Megatron's; ``largest_layer_params`` DeepSpeed ZeRO-3's;
    ``dtype_bytes`` accelerate's dtype (2 for bf16, 4 for fp32)."""
    check_choice("tool", tool, PEERS)
    check_int("num_params", num_params, minimum=0)
    check_int("dp", dp)
    check_bool("distributed_optimizer", distributed_optimizer)
    check_int("largest_layer_params", largest_layer_params, minimum=0)
    check_int("dtype_bytes", dtype_bytes)
    if tool == "megatron":
        per_param = 6 + 12 / dp if distributed_optimizer else 18
        return int(num_params * per_param)
    if tool == "deepspeed_zero2":
        return 2 * num_params + int(18 * num_params / dp)
    if tool == "deepspeed_zero2_before_5099":
        return 4 * num_params + int(16 * num_params / dp)
    if tool == "deepspeed_zero3":
        return 4 * largest_layer_params + int(18 * num_params / dp)
    return 4 * dtype_bytes * num_params  # accelerate
