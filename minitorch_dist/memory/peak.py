"""The peak of a training step, not only what is alive at the end of the forward pass.

:func:`~minitorch_dist.memory.predict` adds the model states and the activations stored for
backward. A step's allocator peak is higher: some tensors live only for a moment, and the peak
is the largest of those moments. :func:`predict_peak` models three of them for a steady-state
step (the optimizer states exist, the gradients were set to ``None`` after the last step):

``loss``
    Backward has just started. Everything the forward stored is alive, plus the fp32 gradient
    of the log-softmax output and the fp32 gradient of the logits that it yields, ``2 x 4bsV``
    bytes: for Llama-3's vocabulary at s = 4096 that is 4 GiB per sequence.
``block``
    A block's MLP is being differentiated: the gradient arriving at the block's output and
    those of SwiGLU's ``b x s x f`` intermediates hold ``p bs (h + 2f)`` more than the saved
    tensors freed so far. For ``none`` and ``selective`` it is the last block, when the loss
    and final-norm activations are gone and only the head's, the final norm's and that block's
    down projection's gradients exist. For ``full`` it is the first block, recomputed: its full
    activations are alive (the other blocks' checkpoints were freed as their backward ended),
    with the gradients of every parameter but the embedding's and the block's own (its down
    projection's gradient excepted).
``optimizer``
    The step: parameters, gradients and optimizer states at once, plus ``optimizer_temp``
    bytes of temporaries (a for-loop Adam makes a few of the size of one parameter; torch's
    foreach Adam, its default on a GPU, makes some of the size of all of them).

Options the book builds later add to a moment: ZeRO-3's gathered units (``gathered_units``
blocks of full parameters, one being used and one prefetched, to every moment after the forward
started) and communication buckets (``bucket_bytes``, to the block and optimizer moments).
The batch (inputs and targets, int64) is counted; workspaces of GPU libraries, the CUDA
context and the allocator's fragmentation are not: the result is what tensors need.

Measured: on CPU the tracker's peak is within 1 % of this for the tiny Llama with every recompute
policy; on an H100/H200 in bf16 the allocator's peak growth over the step equals the ``loss``
moment within 0.01 % (``benchmarks/results/h200_gpu_step_profile.md``).
"""

from __future__ import annotations

from minitorch_dist.checks import check_int
from minitorch_dist.memory.estimate import llama_activation_breakdown
from minitorch_dist.memory.prediction import ACTIVATION_DTYPE_BYTES, predict
from minitorch_dist.models import LlamaConfig

__all__ = ["PEAK_MOMENTS", "predict_peak"]

PEAK_MOMENTS = ("loss", "block", "optimizer")


def predict_peak(
    preset: str | LlamaConfig,
    seq_len: int,
    micro_batch: int,
    recompute: str = "none",
    zero_stage: int = 0,
    dp: int = 1,
    recipe: str = "mixed",
    optimizer: str = "adam",
    *,
    optimizer_temp: int = 0,
    gathered_units: int | None = None,
    bucket_bytes: int = 0,
) -> dict[str, int | str]:
    """Bytes per rank at each moment of :data:`PEAK_MOMENTS` and the ``peak`` (their maximum),
    with ``at`` naming the moment; ``resident`` is what lives between steps (parameters,
    optimizer states, the batch). Arguments as :func:`~minitorch_dist.memory.predict`.

    ``gathered_units`` (ZeRO-3 only; default 2): blocks whose full parameters are gathered at
    once. ``optimizer_temp``: temporaries of the optimizer step, in bytes. ``bucket_bytes``:
    a communication bucket alive during backward and the step.
    """
    config = preset if isinstance(preset, LlamaConfig) else LlamaConfig.from_preset(preset)
    check_int("optimizer_temp", optimizer_temp, minimum=0)
    check_int("bucket_bytes", bucket_bytes, minimum=0)
    if gathered_units is None:
        gathered_units = 2 if zero_stage == 3 else 0
    check_int("gathered_units", gathered_units, minimum=0)
    if gathered_units and zero_stage != 3:
        raise ValueError(f"gathered_units={gathered_units} needs zero_stage=3, got {zero_stage}")
    base = predict(config, seq_len, micro_batch, recompute, zero_stage, dp, recipe, optimizer)
    psi = config.num_params()
    p = ACTIVATION_DTYPE_BYTES[recipe]  # activation bytes per element
    parts = llama_activation_breakdown(
        config, seq_len=seq_len, micro_batch=micro_batch, dtype_bytes=p, recompute=recompute
    )
    grad_per_param = base["grads"] / psi  # ZeRO-2/3 shard them: the fraction is per rank
    param_per_param = base["params"] / psi
    b, s, h, f, V = micro_batch, seq_len, config.hidden, config.ffn_hidden, config.vocab_size
    bs, counts = b * s, config.param_counts()
    batch = 2 * 8 * bs  # inputs and targets, int64
    resident = base["params"] + base["optimizer"] + batch
    per_block = (counts["attention"] + counts["mlp"]) // config.layers + 2 * h
    gathered = gathered_units * per_block * round(param_per_param * dp)  # full, not a shard
    acts = base["activations"]
    tail = parts["loss"] + parts["final_norm"]  # saved by the loss and the final norm
    down = h * f  # the block's down projection, whose gradient comes first
    # the gradient arriving at the block's output and SwiGLU's intermediates' gradients
    mlp_backward = p * bs * (2 * f + h)
    if recompute == "full":
        block_none = (
            llama_activation_breakdown(
                config, seq_len=seq_len, micro_batch=micro_batch, dtype_bytes=p, recompute="none"
            )["blocks"]
            // config.layers
        )
        grads_done = psi - counts["embedding"] - per_block + down
        # the other blocks' checkpoints were freed when their backward finished
        block = parts["rope"] + block_none + mlp_backward
    else:
        grads_done = counts["head"] + h + down
        block = acts - tail + mlp_backward
    moments = {
        "loss": resident + acts + 2 * 4 * bs * V + gathered,
        "block": resident + block + round(grads_done * grad_per_param) + gathered + bucket_bytes,
        "optimizer": resident + base["grads"] + optimizer_temp + bucket_bytes,
    }
    at = max(PEAK_MOMENTS, key=moments.__getitem__)
    return {**moments, "resident": resident, "peak": moments[at], "at": at}
