"""The planner's exact count: the bytes the package's own parallel code holds, term by term.

:func:`~minitorch_dist.planner.rank_memory` counts activations with Korthikanti et al. 2022's
textbook formula (``activations="korthikanti"``, section 4, Table 2). ``activations="exact"``
counts what the code of chapters 6-10 stores, composed as
:func:`minitorch_dist.parallel3d.build_3d` composes it (``benchmarks/planner_vs_code.py`` holds
the two against the code on fake tensors, chapter 12 shows the table):

- per layer, bf16, the Llama's own list (:func:`~minitorch_dist.tensor_parallel.
  tp_activation_breakdown`: SwiGLU's four ``(b, s, f/t)`` tensors where Korthikanti counts a
  GeLU MLP's two, the gathered inputs of the column-parallel linears, GQA's k and v, the fp32
  logsumexp of fused attention), for ``s / cp`` tokens; selective recomputation drops the
  logsumexp, full keeps the block's input and recomputes one block whole in backward. A MoE
  layer (dropless, expert-parallel, a balanced router): the router's fp32 input, the ``T k``
  rows each rank's experts receive, their SwiGLU tensors, the combined rows and the small
  routing tensors;
- per micro-batch and chunk: the received input and the output kept for the backward (a
  pipeline's boundary tensors), RoPE's tables for the rank's tokens, the token ids on the first
  stage; on the last stage the final norm, the head's gathered input and the
  loss moment: the vocabulary-parallel cross-entropy's backward holds the saved fp32 softmax,
  its fp32 clone, the fp32 product with the incoming gradient and its bf16 copy at once,
  ``14 b (s / cp) V_p / t`` bytes (``12 b s V`` for the plain ``cross_entropy`` of a tp = 1
  model: log-probabilities and two fp32 gradients) -- the fp32 vocabulary-sized gradients the
  textbook count leaves out;
- the schedule's in-flight micro-batches, :func:`~minitorch_dist.planner.in_flight`;
- model states as the code keeps them: bf16 parameters and gradients; ZeRO-0 an fp32 master, m
  and v of every parameter; ZeRO-1 those of the shard, sharded over ``dp x cp`` (the ranks that
  hold the same weights, as Megatron-LM's distributed optimizer shards them; experts over
  ``dp / ep x cp``) plus the gradient clipping's bf16 mask of the shard; ZeRO-3
  (:func:`~minitorch_dist.zero.apply_zero3`, bf16 compute) the fp32 shard and its bf16 copy,
  the fp32 gradient shard, m and v, ``18 S``. The step's moment: ZeRO-1's gradient norm
  (:mod:`minitorch_dist.parallel3d.clip`) holds the squared shard and its masked copy in fp64,
  ``16 S`` -- a cost of our code (a real framework takes the norm per tensor in fp32), which sets
  the peak when activations are small (full recomputation); ZeRO-0 an fp32 gradient copy.

A rank's peak is the larger of its backward moment (the stored activations plus the loss
moment, or plus backward's working set in one block: the gathered output gradient and SwiGLU's
two input gradients; under full recomputation plus one block recomputed whole) and its step
moment.
"""

from __future__ import annotations

from minitorch_dist.models.configs import padded_vocab_size
from minitorch_dist.tensor_parallel.cost import tp_activation_breakdown

from .config import ParallelConfig, in_flight, micro_batches
from .memo import split_layers

__all__ = ["exact_activation_bytes", "exact_rank_memory"]


def _fields(config: ParallelConfig) -> dict:
    return {k: getattr(config, k) for k in config.__dataclass_fields__}


P = 2  # bytes of a bf16 activation


def exact_activation_bytes(llama, config: ParallelConfig, *, seq_len: int, moe=None) -> int:  # noqa: ANN001
    """Bytes one layer of one micro-batch stores on one rank in the package's code (bf16);
    ``moe`` (a :class:`~minitorch_dist.models.moe_configs.MoEConfig`): a MoE layer's."""
    c = config
    s, b, t, h = seq_len // c.cp, c.micro_batch, c.tp, llama.hidden
    if c.recompute == "full":  # the checkpointed Block keeps its input, s/t tokens under sp
        return P * b * s * h // (t if c.sp else 1)
    parts = tp_activation_breakdown(
        llama, micro_batch=b, seq_len=s, tp=t, sp=c.sp, bytes_per_element=P
    )
    if c.recompute == "selective":  # the attention core recomputed: its fp32 logsumexp goes
        parts["core"] -= 4 * b * llama.heads * s // t
    if moe is not None:  # dropless expert-parallel MoE block, tp = 1, a balanced router
        tokens, k, f = b * s, moe.top_k, moe.expert_ffn
        parts["linear_inputs"] //= 2  # the router reads an fp32 copy; dispatch indexes x
        parts["mlp"] = (
            4 * tokens * h  # the router's fp32 input
            + P * tokens * k * (3 * h + 4 * f)  # rows in, SwiGLU's four, rows out, weighted
            + 8 * tokens * moe.experts
            + 4 * tokens
            + 38 * tokens * k  # probabilities, indices
        )
        if moe.shared_experts:
            parts["mlp"] += P * tokens * (h + 4 * moe.shared_experts * f)
    return sum(parts.values())


def _states(model, c: ParallelConfig, stage: int) -> tuple[dict[str, int], int]:  # noqa: ANN001
    """Model states as the code keeps them (``fp32``: the elements whose fp32 master, m and v
    offload would move), and the extra bytes of the optimizer step."""
    dense, expert = model.params_per_rank(tp=c.tp, pp=c.pp, ep=c.ep, stage=stage)
    if c.zero == 3:  # apply_zero3, bf16 compute: fp32 shard + its bf16 copy, fp32 grad, m, v
        shard = -(-(dense + expert) // c.dp)
        return {"params": 6 * shard, "grads": 4 * shard, "optimizer": 8 * shard, "fp32": shard}, 0
    psi = dense + expert
    if c.zero == 0:  # MixedPrecisionOptimizer: fp32 master, m, v of everything
        return {"params": 2 * psi, "grads": 2 * psi, "optimizer": 12 * psi, "fp32": psi}, 4 * psi
    shard = -(-dense // (c.dp * c.cp)) + -(-expert // (c.dp // c.ep * c.cp))
    # ZeRO-1 (build_3d) over dp x cp: fp32 master, m, v and the clipping mask (bf16) of the
    # shard; the step's gradient norm holds the squared shard and its masked copy in fp64.
    # ZeRO-2 keeps a bf16 gradient shard (chapter 6's closed form: build_3d has no stage 2)
    grads = 2 * shard if c.zero == 2 else 2 * psi
    return {"params": 2 * psi, "grads": grads, "optimizer": 14 * shard, "fp32": shard}, 16 * shard


def exact_rank_memory(
    model,
    config: ParallelConfig,
    *,
    seq_len: int,
    global_batch: int,
    stage: int = 0,  # noqa: ANN001
) -> dict[str, int]:
    """:func:`~minitorch_dist.planner.rank_memory`'s keys, counted as the code stores them."""
    if config.shard_group:
        raise ValueError(
            "shard_group > 0 (HSDP): the package's code has no HSDP to count "
            "exactly; use activations='korthikanti'"
        )
    c, llama, moe = config, model.llama, model.moe
    m = micro_batches(c, global_batch)
    s, b, t, h = seq_len // c.cp, c.micro_batch, c.tp, llama.hidden
    split = t if c.sp else 1
    vocab = padded_vocab_size(llama.vocab_size, t) // t if t > 1 else llama.vocab_size
    states, step = _states(model, c, stage)
    sizes = split_layers(llama.layers, c.pp)
    first_layer = sum(sizes[:stage])
    moe_layers = (
        0
        if moe is None
        else sum(1 for i in range(first_layer, first_layer + sizes[stage]) if i >= moe.dense_layers)
    )
    dense_layers = sizes[stage] - moe_layers
    blocks = dense_layers * exact_activation_bytes(llama, c, seq_len=seq_len)
    if moe_layers:
        blocks += moe_layers * exact_activation_bytes(llama, c, seq_len=seq_len, moe=moe)
    chunk = P * 2 * s * llama.head_dim  # RoPE's cos and sin for this rank's tokens
    boundary = P * b * s * h // split  # what crosses a stage boundary, per micro-batch
    # each chunk keeps its input (but the first stage's) and its output (but the last stage's)
    crossings = 2 * c.v - (stage == 0) - (stage == c.pp - 1)
    flight = in_flight(c.pp, c.v, m, stage)
    activations = round((blocks + c.v * chunk + crossings * boundary) * flight)
    if stage == 0:
        activations += 8 * b * s * round(flight)  # the token ids the embedding keeps
    logits = 0
    if stage == c.pp - 1:  # final norm and the head's (gathered) input, then the loss
        activations += P * (2 * b * s * h + b * s) // split + P * b * s * h
        # the loss's fp32 tensors at the start of its backward: vocabulary-parallel (tp > 1:
        # softmax, its clone, the product with the gradient, a bf16 copy) 14 bytes an entry;
        # cross_entropy (log-probabilities, the gradient of nll_loss, of log_softmax) 12
        logits = (14 if t > 1 else 12) * b * s * vocab
    # backward's working set in a block: the gathered output gradient, SwiGLU's two input grads
    working = P * b * s * h + 2 * P * b * s * llama.ffn_hidden // t
    moment = activations + max(logits, working)
    if c.recompute == "full":  # backward recomputes one block whole, beside what is stored
        whole = exact_activation_bytes(
            llama, ParallelConfig(**{**_fields(c), "recompute": "none"}), seq_len=seq_len
        )
        moment = activations + max(logits, whole)
    fp32 = states.pop("fp32")
    cpu = 0
    if c.offload:  # ZeRO-Offload (chapter 6's closed form): fp32 master, m, v in CPU memory
        cpu = 12 * fp32
        if c.zero == 3:  # the master is the fp32 shard itself
            states["params"] -= 4 * fp32
            states["optimizer"] -= 8 * fp32
        else:
            states["optimizer"] -= 12 * fp32
    out = {**states, "activations": activations, "logits": logits}
    out["total"] = sum(states.values()) + max(moment, step)
    out["cpu"] = cpu
    return out
