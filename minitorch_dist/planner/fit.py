"""Does a configuration fit? Bytes per rank, from the memory estimator of chapters 1, 6 and 7.

Model states (chapter 6): the parameters one rank holds,
:meth:`~minitorch_dist.models.LlamaConfig.num_params_per_rank`, at 16 bytes each for
mixed-precision Adam (Rajbhandari et al. 2020, section 3.1), ZeRO stage k sharding the optimizer
states (k >= 1), gradients (k >= 2) and parameters (k = 3) over the ``dp x cp`` ranks that hold
the same weights (:func:`~minitorch_dist.memory.model_state_bytes`; the cp ranks of a sequence
reduce their gradients together, so they share the shard, as in Megatron-LM's distributed
optimizer and torchtitan's ``dp_shard_cp``). Experts are replicated over ``dp / ep`` ranks
only, so their ZeRO shard is ``1 / (dp / ep x cp)``. Under HSDP (``shard_group`` g,
:mod:`.hsdp`) the dense states are sharded over the ``g x cp`` ranks of a shard group. ZeRO-3's
resharding policy (``ParallelConfig.reshard``) prices what it keeps: freeing the gathered
parameters after forward and after backward (the default) holds one layer's at a time, not
counted; keeping them from forward to backward or across micro-batches holds the stage's
unsharded 16-bit parameters, ``2 Psi_r`` bytes more; reducing the gradients once per step also
holds their unsharded ``2 Psi_r`` instead of a shard.

Activations (chapters 3, 7, 8): one layer of one micro-batch stores
:func:`~minitorch_dist.memory.activation_bytes` -- Korthikanti et al. 2022, section 4, Table 2:
``s b h (34 + 5 a s / h)`` bytes, split over t by tensor (and sequence) parallelism, over cp by
context parallelism, cut by recomputation. Stage ``i`` of a 1F1B pipeline holds its layers for
``min(p - i, m)`` micro-batches at once (Narayanan et al. 2021, section 2.2.1): stage 0 holds p,
which is ``L / p`` layers times p, the whole model's activations for one micro-batch, whatever p
(Korthikanti et al. 2022, section 4.2.3). Interleaving holds more on stage 0,
:func:`~minitorch_dist.pipeline.first_stage_activation_factor` times as much. The last stage also
keeps the loss's fp32 log-probabilities, ``4 b (s / cp) V / t`` bytes (vocab-parallel).

Peak = the larger of the first and the last stage (the middle ones hold fewer layers or fewer
micro-batches than the first). Left out, as in :func:`minitorch_dist.memory.predict`: temporary
buffers, the CUDA context, allocator fragmentation.

That is the textbook count (``activations="korthikanti"``, the default). ``activations="exact"``
counts instead what the package's own code holds (:mod:`.exact`): SwiGLU's tensors, the loss
moment's fp32 vocabulary gradients, each schedule's in-flight tensors, ZeRO as the code shards
it; ``benchmarks/planner_vs_code.py`` holds it within 1 % of that code at Llama 3 8B/70B scale.
"""

from __future__ import annotations

from minitorch_dist.checks import check_choice

from .config import ParallelConfig, in_flight, micro_batches
from .exact import exact_rank_memory
from .memo import activation_bytes, model_state_bytes, split_layers  # memoised, same numbers

__all__ = ["ACTIVATIONS", "fits", "peak_memory", "rank_memory"]

ACTIVATIONS = ("korthikanti", "exact")  # the textbook count, or what the package's code stores


def rank_memory(
    model,
    config: ParallelConfig,
    *,
    seq_len: int,
    global_batch: int,
    stage: int = 0,  # noqa: ANN001
    activations: str = "korthikanti",
) -> dict[str, int]:
    """Bytes on one rank of pipeline stage ``stage``: ``params``, ``grads``, ``optimizer``,
    ``activations``, ``logits`` and their ``total`` on the device; ``cpu``, what offload moved.
    ``activations="exact"``: what the package's code holds (:mod:`.exact`), not Korthikanti's."""
    check_choice("activations", activations, ACTIVATIONS)
    if activations == "exact":
        if config.reshard != "after_forward":
            raise ValueError(
                f"reshard={config.reshard!r}: the package's ZeRO-3 frees the gathered parameters "
                "after forward and after backward; the exact count has no other policy"
            )
        return exact_rank_memory(
            model, config, seq_len=seq_len, global_batch=global_batch, stage=stage
        )
    c = config
    llama = model.llama
    dense, expert = model.params_per_rank(tp=c.tp, pp=c.pp, ep=c.ep, stage=stage)
    m = micro_batches(c, global_batch)
    # BEGIN SOLUTION lab12.1: states sharded over dp x cp (experts dp/ep x cp), activations in flight
    states = model_state_bytes(dense, zero_stage=c.zero, dp=c.shard, offload=c.offload)
    experts = model_state_bytes(expert, zero_stage=c.zero, dp=c.expert_shard, offload=c.offload)
    per_layer = activation_bytes(
        seq_len=seq_len,
        micro_batch=c.micro_batch,
        hidden=llama.hidden,
        heads=llama.heads,
        tp=c.tp,
        sp=c.sp,
        recompute=c.recompute,
        cp=c.cp,
    )
    layers = split_layers(llama.layers, c.pp)[stage]
    activations = round(per_layer * layers * in_flight(c.pp, c.v, m, stage))
    last = stage == c.pp - 1  # fp32 log-probabilities of this rank's vocabulary slice
    logits = 4 * c.micro_batch * (seq_len // c.cp) * llama.vocab_size // c.tp if last else 0
    # END SOLUTION
    out = {k: states[k] + experts[k] for k in ("params", "grads", "optimizer")}
    if c.zero == 3 and c.reshard != "after_forward":  # the unsharded stage, held (RESHARD)
        out["params"] += 2 * (dense + expert)
        if c.reshard == "after_step_no_sync":  # and its gradients, reduce-scattered at the end
            out["grads"] = 2 * (dense + expert)
    out["activations"] = activations
    out["logits"] = logits
    out["total"] = sum(out.values())
    out["cpu"] = states["offloaded"] + experts["offloaded"]
    return out


def peak_memory(
    model,
    config: ParallelConfig,
    *,
    seq_len: int,
    global_batch: int,  # noqa: ANN001
    activations: str = "korthikanti",
) -> dict[str, int]:
    """:func:`rank_memory` of the fuller of the first and last stages, with its ``stage``."""
    stages = sorted({0, config.pp - 1})
    parts = [
        rank_memory(
            model,
            config,
            seq_len=seq_len,
            global_batch=global_batch,
            stage=s,
            activations=activations,
        )
        for s in stages
    ]
    best = max(range(len(stages)), key=lambda i: (parts[i]["total"], -stages[i]))
    return {**parts[best], "stage": stages[best]}


def fits(model, cluster, config: ParallelConfig, *, seq_len: int, global_batch: int) -> bool:  # noqa: ANN001
    """Whether the fullest rank's bytes fit in one GPU's memory."""
    peak = peak_memory(model, config, seq_len=seq_len, global_batch=global_batch)
    return peak["total"] <= cluster.memory_bytes
