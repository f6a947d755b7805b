"""The memory predictor's model: bytes per rank of one training configuration, as a pure function.

:func:`predict` is the whole model: the model states of
:func:`~minitorch_dist.memory.model_state_bytes` (16 bytes per parameter for mixed-precision Adam,
ZeRO's section 3.1; sharded over ``dp`` ranks by ZeRO stage 1-3, section 5) plus the stored
activations of one micro-batch by :func:`~minitorch_dist.memory.llama_activation_bytes` (the count
of Korthikanti et al. 2022, section 4, redone for the Llama architecture). Data parallelism and
ZeRO do not touch activations: every rank runs its own micro-batch through the whole model.
With ``offload=True`` (ZeRO-Offload, Ren et al. 2021) the optimizer states leave the device:
its ``optimizer`` is 0, and ``cpu`` gives what each rank keeps in CPU memory instead -- an fp32
master copy of its shard and the optimizer's fp32 states (12 bytes per element for Adam, whatever
the recipe: an fp32 recipe needs no master copy on the device, but the CPU still updates one).
Lab 6 checks these numbers against ZeRO stages 0-3 and offload measured on emulated ranks.

What it leaves out: temporary buffers (the logits' gradients while backward starts,
communication buckets), the CUDA context, and the caching allocator's rounding and fragmentation
-- a real run needs some headroom above the total. :func:`~minitorch_dist.memory.predict_peak`
adds the temporaries: the peak of a step, moment by moment. It is accounting, not UI: the ipywidgets explorer of
:mod:`minitorch_dist.viz` calls it, and so do chapters 1 and 6, labs 1 and 6 and their tests.
"""

from __future__ import annotations

from minitorch_dist.memory.estimate import (
    RECIPES,
    bytes_per_param,
    llama_activation_bytes,
    model_state_bytes,
)
from minitorch_dist.models import LlamaConfig

__all__ = ["ACTIVATION_DTYPE_BYTES", "OFFLOAD", "predict"]

# Bytes per activation element under each recipe: mixed precision computes in 16 bits.
ACTIVATION_DTYPE_BYTES = {"mixed": 2, "mixed_fp32_grads": 2, "fp32": 4}
OFFLOAD = (False, True, "optimizer", "zero-offload")  # see predict


def predict(
    preset: str | LlamaConfig,
    seq_len: int,
    micro_batch: int,
    recompute: str = "none",
    zero_stage: int = 0,
    dp: int = 1,
    recipe: str = "mixed",
    optimizer: str = "adam",
    offload: bool | str = False,
) -> dict[str, int]:
    """Bytes per rank: ``params``, ``grads``, ``optimizer``, ``activations`` and their ``total``
    on the device; with ``offload=True`` also ``cpu``, the bytes each rank keeps in CPU memory.

    ``preset`` is a :class:`LlamaConfig` or a preset name; the activations are those of one
    micro-batch of ``micro_batch`` sequences of ``seq_len`` tokens, 2 bytes per element for the
    mixed recipes and 4 for ``fp32``, under the ``recompute`` policy.

    ``offload``: ``False``; ``True`` or ``"optimizer"`` moves the optimizer states and the update
    to the CPU (this package's ``CpuOffloadAdam``: the gradient shard stays on the device until
    the step); ``"zero-offload"`` is the recipe of the ZeRO-Offload paper (Ren et al. 2021,
    section 4), which moves the 16-bit gradients to the CPU as well: at ``dp=1`` the device keeps
    ``2 Psi`` and the CPU ``14 Psi``.
    """
    if not (isinstance(offload, bool) or offload in ("optimizer", "zero-offload")):
        raise ValueError(f"offload must be one of {OFFLOAD}, got {offload!r}")
    grads_too = offload == "zero-offload"
    offload = bool(offload)
    config = preset if isinstance(preset, LlamaConfig) else LlamaConfig.from_preset(preset)
    if recipe not in ACTIVATION_DTYPE_BYTES:
        raise ValueError(f"recipe must be one of {', '.join(RECIPES)}, got {recipe!r}")
    psi = config.num_params()
    states = model_state_bytes(
        psi, zero_stage=zero_stage, dp=dp, recipe=recipe, optimizer=optimizer, offload=offload
    )
    activations = llama_activation_bytes(
        config,
        seq_len=seq_len,
        micro_batch=micro_batch,
        dtype_bytes=ACTIVATION_DTYPE_BYTES[recipe],
        recompute=recompute,
    )
    result = {c: states[c] for c in ("params", "grads", "optimizer")}
    result["activations"] = activations
    result["total"] = states["total"] + activations
    if offload:  # fp32 master copy + fp32 optimizer states of this rank's shard, on the CPU
        shard = -(-psi // dp) if zero_stage >= 1 else psi
        result["cpu"] = bytes_per_param("mixed", optimizer)["optimizer"] * shard
    if grads_too:  # the (16-bit) gradient shard lives in CPU memory too
        result["cpu"] += result["grads"]
        result["total"] -= result["grads"]
        result["grads"] = 0
    return result
