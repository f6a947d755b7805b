"""Memory: where the bytes of a training step go (chapter 1, lab 1).

``estimate`` counts them with closed-form formulas (ZeRO's 16 bytes per parameter, Korthikanti et
al.'s activation formula, and the same count redone for our Llama); ``track`` measures them with a
dispatch mode that follows live tensor storages; ``fake`` runs the measurement on fake tensors, so
a 7B model is "trained" for one step on a laptop without allocating its memory.
"""

from minitorch_dist.memory.estimate import (
    OPTIMIZERS,
    RECIPES,
    RECOMPUTE,
    activation_bytes,
    bytes_per_param,
    format_bytes,
    llama_activation_breakdown,
    llama_activation_bytes,
    model_state_bytes,
)
from minitorch_dist.memory.fake import measure_step_fake
from minitorch_dist.memory.track import CATEGORIES, PHASES, MemoryTracker, measure_step

__all__ = [
    "CATEGORIES",
    "OPTIMIZERS",
    "PHASES",
    "RECIPES",
    "RECOMPUTE",
    "MemoryTracker",
    "activation_bytes",
    "bytes_per_param",
    "format_bytes",
    "llama_activation_breakdown",
    "llama_activation_bytes",
    "measure_step",
    "measure_step_fake",
    "model_state_bytes",
]
