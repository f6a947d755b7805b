"""Models: :class:`LlamaConfig` (presets of real Llama checkpoints) and the tiny :class:`Llama`
that every lab trains, plus synthetic token data to train it on, and :func:`split_model`, which
cuts a Llama into pipeline stages (:class:`LlamaStage`) that share its submodules; a mixture-of-experts MLP (:mod:`~minitorch_dist.models.moe`,
:class:`MoEConfig` with presets of real MoE checkpoints and their exact counts) that
:func:`use_moe` swaps into the tiny Llama."""

from minitorch_dist.lazy import attach

_EXPORTS = {  # module -> the names it provides, imported on first use (minitorch_dist.lazy)
    ".configs": ("PRESETS", "LlamaConfig", "padded_vocab_size", "preset_names", "split_layers"),
    ".data": ("SyntheticTokens", "markov_entropy", "synthetic_batch"),
    ".llama": (
        "Attention",
        "AttentionCore",
        "Block",
        "Llama",
        "RMSNorm",
        "SwiGLU",
        "apply_rope",
        "cross_entropy",
        "rope_for",
        "rope_tables",
    ),
    ".moe": (
        "MOE_PRESETS",
        "MoEBlock",
        "MoEConfig",
        "moe_active_params",
        "moe_num_params",
        "moe_params_per_rank",
        "moe_preset",
        "use_moe",
    ),
    ".stage": ("LlamaStage", "split_model"),
}

__all__ = [
    "MOE_PRESETS",
    "PRESETS",
    "Attention",
    "AttentionCore",
    "Block",
    "Llama",
    "LlamaConfig",
    "LlamaStage",
    "MoEBlock",
    "MoEConfig",
    "RMSNorm",
    "SwiGLU",
    "SyntheticTokens",
    "apply_rope",
    "cross_entropy",
    "markov_entropy",
    "moe_active_params",
    "moe_num_params",
    "moe_params_per_rank",
    "moe_preset",
    "padded_vocab_size",
    "preset_names",
    "rope_for",
    "rope_tables",
    "split_layers",
    "split_model",
    "synthetic_batch",
    "use_moe",
]

__getattr__, __dir__ = attach(__name__, _EXPORTS, __all__)
