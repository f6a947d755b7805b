"""Memory: where the bytes of a training step go (chapter 1, lab 1).

``estimate`` counts them with closed-form formulas (ZeRO's 16 bytes per parameter, Korthikanti et
al.'s activation formula, and the same count redone for our Llama); ``prediction`` adds them up
per rank for a whole configuration (:func:`predict`, the model behind ``viz``'s predictor
widget); ``track`` measures them with a dispatch mode that follows live tensor storages; ``fake``
runs the measurement on fake tensors, so a 7B model is "trained" for one step on a laptop without
allocating its memory. ``plots`` draws chapter 1's figures from these numbers; it is not imported
here, so ``import minitorch_dist.memory`` does not import matplotlib.
"""

from minitorch_dist.lazy import attach

_EXPORTS = {  # module -> the names it provides, imported on first use (minitorch_dist.lazy)
    ".estimate": (
        "OPTIMIZERS",
        "RECIPES",
        "RECOMPUTE",
        "activation_bytes",
        "bytes_per_param",
        "format_bytes",
        "llama_activation_breakdown",
        "llama_activation_bytes",
        "model_state_bytes",
    ),
    ".fake": ("measure_step_fake",),
    ".peak": ("PEAK_MOMENTS", "predict_peak"),
    ".peers": ("PEERS", "peer_model_state_bytes"),
    ".prediction": ("ACTIVATION_DTYPE_BYTES", "predict"),
    ".track": ("CATEGORIES", "PHASES", "MemoryTracker", "measure_step"),
}

__all__ = [
    "ACTIVATION_DTYPE_BYTES",
    "CATEGORIES",
    "OPTIMIZERS",
    "PEAK_MOMENTS",
    "PEERS",
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
    "peer_model_state_bytes",
    "predict",
    "predict_peak",
]

__getattr__, __dir__ = attach(__name__, _EXPORTS, __all__)
