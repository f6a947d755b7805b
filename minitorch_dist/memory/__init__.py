"""Memory: where the bytes of a training step go (chapter 1, lab 1).

``estimate`` counts them with closed-form formulas (ZeRO's 16 bytes per parameter, Korthikanti et
al.'s activation formula, and the same count redone for our Llama); ``prediction`` adds them up
per rank for a whole configuration (:func:`predict`, the model behind ``viz``'s predictor
widget); ``track`` follows them with a dispatch mode over live tensor storages, and ``measure``
measures one training step with it; ``fake`` runs the measurement on fake tensors, so a 7B model
is "trained" for one step on a laptop without allocating its memory. ``plots`` draws chapter 1's figures from these numbers; it is not imported
here, so ``import minitorch_dist.memory`` does not import matplotlib.
"""

from typing import TYPE_CHECKING

from minitorch_dist.lazy import attach

if TYPE_CHECKING:  # what an editor follows; attach() imports each name on first use
    from .estimate import (
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
    from .fake import measure_step_fake
    from .measure import measure_step
    from .peak import PEAK_MOMENTS, predict_peak
    from .peers import PEERS, peer_model_state_bytes
    from .prediction import ACTIVATION_DTYPE_BYTES, predict
    from .track import CATEGORIES, PHASES, MemoryTracker

__getattr__, __dir__ = attach(__name__)  # __all__: the names imported above
