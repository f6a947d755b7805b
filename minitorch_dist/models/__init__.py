"""Models: :class:`LlamaConfig` (presets of real Llama checkpoints) and the tiny :class:`Llama`
that every lab trains, plus synthetic token data to train it on, and :func:`split_model`, which
cuts a Llama into pipeline stages (:class:`LlamaStage`) that share its submodules; a mixture-of-experts MLP (:mod:`~minitorch_dist.models.moe`,
:class:`MoEConfig` with presets of real MoE checkpoints and their exact counts) that
:func:`use_moe` swaps into the tiny Llama; it routes with :mod:`~minitorch_dist.models.routing`
(lab 10's top-k router, load-balancing loss and capacity)."""

from typing import TYPE_CHECKING

from minitorch_dist.lazy import attach

if TYPE_CHECKING:  # what an editor follows; attach() imports each name on first use
    from .configs import PRESETS, LlamaConfig, padded_vocab_size, preset_names, split_layers
    from .data import SyntheticTokens, markov_entropy, synthetic_batch
    from .llama import (
        Attention,
        AttentionCore,
        Block,
        Llama,
        RMSNorm,
        SwiGLU,
        apply_rope,
        cross_entropy,
        rope_for,
        rope_tables,
    )
    from .moe import (
        MOE_PRESETS,
        MoEBlock,
        MoEConfig,
        moe_active_params,
        moe_num_params,
        moe_params_per_rank,
        moe_preset,
        use_moe,
    )
    from .stage import LlamaStage, split_model

__getattr__, __dir__ = attach(__name__)  # __all__: the names imported above
