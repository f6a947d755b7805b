"""Models: :class:`LlamaConfig` (presets of real Llama checkpoints) and the tiny :class:`Llama`
that every lab trains, plus synthetic token data to train it on."""

from minitorch_dist.models.configs import PRESETS, LlamaConfig, preset_names
from minitorch_dist.models.data import SyntheticTokens, markov_entropy, synthetic_batch
from minitorch_dist.models.llama import (
    Attention,
    AttentionCore,
    Block,
    Llama,
    RMSNorm,
    SwiGLU,
    apply_rope,
    cross_entropy,
    rope_tables,
)

__all__ = [
    "PRESETS",
    "Attention",
    "AttentionCore",
    "Block",
    "Llama",
    "LlamaConfig",
    "RMSNorm",
    "SwiGLU",
    "SyntheticTokens",
    "apply_rope",
    "cross_entropy",
    "markov_entropy",
    "preset_names",
    "rope_tables",
    "synthetic_batch",
]
