"""The planner's exact count: the bytes the package's own parallel code holds, term by term.

:func:`~minitorch_dist.planner.rank_memory` counts activations with Korthikanti et al. 2022's
textbook formula (``activations="korthikanti"``). ``activations="exact"`` counts what the code
of chapters 6-9, composed as :func:`minitorch_dist.parallel3d.build_3d` composes it, stores
(``benchmarks/planner_vs_code.py`` holds the two against the code on fake tensors):

- per layer, bf16, the Llama's own list (:func:`~minitorch_dist.tensor_parallel.
  tp_activation_breakdown`: SwiGLU's four ``(b, s, f/t)`` tensors where Korthikanti counts a
  GeLU MLP's, the gathered inputs of the column-parallel linears, GQA's k and v, the fp32
  logsumexp of fused attention; selective recomputation drops the logsumexp, full keeps the
  block's input), for ``s / cp`` tokens;
- per micro-batch and chunk: the received input, RoPE's tables for the rank's tokens; on the
  last stage the final norm, the head's (gathered) input and the loss's fp32 softmax;
- the loss moment, on the last stage: the vocabulary-parallel cross-entropy's backward holds the
  saved fp32 softmax, its fp32 clone, the fp32 product with the incoming gradient and its bf16
  copy at once, ``14 b (s / cp) V_p / t`` bytes -- the two fp32 vocabulary-sized gradients the
  textbook count leaves out;
- model states as the code keeps them: bf16 parameters and gradients, ZeRO-1's fp32 master, m
  and v sharded over ``dp x cp`` (the ranks that hold the same weights, as Megatron-LM's
  distributed optimizer shards them); the step's gradient norm (:mod:`minitorch_dist.parallel3d.
  clip`) holds three fp64 copies of the shard at once, ``24 S`` bytes -- a cost of our code (a
  real framework takes the norm per tensor in fp32), which sets the peak when activations are
  small (full recomputation). ZeRO-3 (:func:`~minitorch_dist.zero.apply_zero3`, bf16 compute):
  fp32 shard, gradient shard and Adam's states, ``16 S``, and the root unit (embedding, final
  norm, head) gathered in bf16 through the loss; it runs the plain ``cross_entropy``, whose
  moment holds 10 bytes per vocabulary entry (fp32 log-probabilities, their gradient, a bf16
  copy) where the vocabulary-parallel one holds 14.

The pipeline schedule keeps :func:`~minitorch_dist.planner.in_flight` micro-batches' worth on
each stage; the peak of a rank is the larger of its backward moment and its step moment.
"""

from __future__ import annotations

from minitorch_dist.models.configs import padded_vocab_size
from minitorch_dist.tensor_parallel.cost import tp_activation_breakdown

from .config import ParallelConfig, micro_batches
from .memo import split_layers

__all__ = ["exact_activation_bytes", "exact_rank_memory"]


def _fields(config: ParallelConfig) -> dict:
    return {k: getattr(config, k) for k in config.__dataclass_fields__}


P = 2  # bytes of a bf16 activation


def exact_activation_bytes(llama, config: ParallelConfig, *, seq_len: int) -> int:  # noqa: ANN001
    """Bytes one layer of one micro-batch stores on one rank in the package's code (bf16)."""
    c = config
    s, b, t = seq_len // c.cp, c.micro_batch, c.tp
    if c.recompute == "full":  # the checkpointed Block keeps its input, s/t tokens under sp
        return P * b * s * llama.hidden // (t if c.sp else 1)
    parts = tp_activation_breakdown(llama, micro_batch=b, seq_len=s, tp=t, sp=c.sp,
                                    bytes_per_element=P)  # fmt: skip
    total = sum(parts.values())
    if c.recompute == "selective":  # the attention core recomputed: its fp32 logsumexp goes
        total -= 4 * b * llama.heads * s // t
    return total


def exact_rank_memory(
    model,
    config: ParallelConfig,
    *,
    seq_len: int,
    global_batch: int,
    stage: int = 0,  # noqa: ANN001
) -> dict[str, int]:
    """:func:`~minitorch_dist.planner.rank_memory`'s keys, counted as the code stores them."""
    from .fit import in_flight  # fit imports this module

    c, llama = config, model.llama
    dense, expert = model.params_per_rank(tp=c.tp, pp=c.pp, ep=c.ep, stage=stage)
    psi = dense + expert
    m = micro_batches(c, global_batch)
    s, b, t, h = seq_len // c.cp, c.micro_batch, c.tp, llama.hidden
    split = t if c.sp else 1
    vocab = padded_vocab_size(llama.vocab_size, t) // t if t > 1 else llama.vocab_size
    gathered = 0
    if c.zero == 3:  # fp32 shard, fp32 gradient of the shard; Adam's m, v
        shard = -(-psi // c.dp)
        states = {"params": 4 * shard, "grads": 4 * shard, "optimizer": 8 * shard}
        step = 0
        # the root unit (embedding, final norm, head) stays gathered in bf16 through the loss
        gathered = P * (2 * llama.vocab_size * h + h) // t
    else:
        shard = -(-psi // (c.dp * c.cp))
        states = {"params": 2 * psi, "grads": 2 * psi, "optimizer": 12 * shard}
        # during the step: the grid-wide gradient norm (parallel3d.clip) squares the shard in
        # fp64, three copies at once (cast, square, mask) -- more than the fp32 gradient copy
        step = 24 * shard
    layers = split_layers(llama.layers, c.pp)[stage]
    per_layer = exact_activation_bytes(llama, c, seq_len=seq_len)
    chunk = P * 2 * s * llama.head_dim  # RoPE's cos and sin for this rank's tokens
    if stage > 0 or c.v > 1:
        chunk += P * b * s * h // split  # the received input, kept for backward
    first, last = stage == 0, stage == c.pp - 1
    flight = in_flight(c.pp, c.v, m, stage)
    activations = round((per_layer * layers + c.v * chunk) * flight)
    if first:
        activations += 8 * b * s * round(flight)  # the token ids the embedding keeps
    logits = 0
    if last:  # final norm, the head's gathered input, then the loss's fp32 vocabulary tensors
        activations += P * (2 * b * s * h + b * s) // split + P * b * s * h
        # vocabulary-parallel loss (build_3d): softmax, its clone, the product, a bf16 copy;
        # the plain cross_entropy (ZeRO-3 runs the whole model): log-probs, their grad, bf16
        logits = (10 if c.zero == 3 else 14) * b * s * vocab
    moment = activations + gathered + logits
    if c.recompute == "full":  # backward recomputes one block whole, beside what is stored
        moment = (
            activations
            + gathered
            + max(
                logits,
                exact_activation_bytes(
                    llama, ParallelConfig(**{**_fields(c), "recompute": "none"}), seq_len=seq_len
                ),
            )
        )
    out = {**states, "activations": activations, "logits": logits}
    out["total"] = sum(states.values()) + max(moment, step)
    out["cpu"] = 0
    return out
