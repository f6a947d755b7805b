"""Activation recomputation (chapter 3, lab 3): trade compute for memory.

``checkpoint`` keeps a segment's inputs and recomputes its inside during backward (Chen et al.
2016); ``policies`` decide which segments of a Llama to checkpoint -- whole blocks ("full") or
only the attention core ("selective", Korthikanti et al. 2022, section 5); ``attention`` holds an
unfused attention core whose (s x s) matrices show what selective recomputation removes;
``op_level`` keeps chosen operators' outputs inside checkpointed blocks (torch's selective
activation checkpoint); ``cost`` counts the bytes stored in closed form, ``measure`` measures
them and the time taken.
"""

from minitorch_dist.recompute.attention import MathAttentionCore, use_attention
from minitorch_dist.recompute.checkpoint import CheckpointFunction, checkpoint
from minitorch_dist.recompute.cost import math_attention_extra_bytes, segment_checkpoint_bytes
from minitorch_dist.recompute.measure import (
    IMPLEMENTATIONS,
    build_model,
    measure_recompute,
    stored_activations,
    time_steps,
)
from minitorch_dist.recompute.op_level import (
    apply_op_level_checkpointing,
    op_level_block_bytes,
    save_matmuls,
)
from minitorch_dist.recompute.policies import (
    POLICIES,
    Policy,
    apply_activation_checkpointing,
    checkpointed_modules,
    full_policy,
    remove_activation_checkpointing,
    resolve_policy,
    selective_policy,
)

__all__ = [
    "IMPLEMENTATIONS",
    "POLICIES",
    "CheckpointFunction",
    "MathAttentionCore",
    "Policy",
    "apply_activation_checkpointing",
    "apply_op_level_checkpointing",
    "build_model",
    "checkpoint",
    "checkpointed_modules",
    "full_policy",
    "math_attention_extra_bytes",
    "measure_recompute",
    "op_level_block_bytes",
    "remove_activation_checkpointing",
    "resolve_policy",
    "save_matmuls",
    "segment_checkpoint_bytes",
    "selective_policy",
    "stored_activations",
    "time_steps",
    "use_attention",
]
