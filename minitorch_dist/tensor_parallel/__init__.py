"""Tensor and sequence parallelism (chapter 7, lab 7): Megatron-LM's f and g (Shoeybi et al.
2019), column- and row-parallel linears, vocabulary-parallel embedding and cross-entropy, and
sequence parallelism (Korthikanti et al. 2022), applied to the tiny Llama as a transform.

    model = apply_tensor_parallel(Llama(cfg), group, sp=True)   # in place; rank r's shards
    loss = tp_loss_fn(group, cfg.vocab_size)(model(x), y)       # equal on every rank

Modules: ``functions`` (the region-crossing autograd Functions), ``layers`` (Column/Row
parallel linears), ``vocab`` (embedding, head, cross-entropy), ``sequence`` (replicated norm
gradients), ``model`` (the transform), ``cost`` (bytes sent and stored, closed forms),
``measure`` (against the reference, CommCounter and the memory tracker), ``overlap`` (a
timeline of a layer's backward with and without the overlapped all-reduce; collective matmul).

Names beyond the chapter-7 API contract of the README (none of them renames a contract name):
- ``vocab_parallel_cross_entropy(..., *, vocab_size=None)``: keyword that masks padded columns.
- ``ColumnParallelLinear.from_linear(..., *, enter_region=True, index=None, parts=None)``.
- ``apply_tensor_parallel(..., *, vocab_multiple=128, reduce_norm_grads=True, regather=False)``;
  ``regather=True`` (with sp) is Megatron-LM's choice: the regions' gathered inputs saved as
  s/t shards and all-gathered again in backward (every stored activation 1/t, 2 more
  all-gathers per layer). ``tp_bytes(..., regather=False)`` and
  ``tp_activation_bytes(..., regather=False)`` count it; default False keeps the contract's
  "sp sends the same bytes as tp".
- ``compare_with_reference(tp, run=None, **options)``: ``run`` a ``measure.TPRun`` (model,
  steps, batch, and the switches that break it on purpose), ``options`` its fields by keyword;
  ``count_tp_bytes(..., recompute="none", dtype)``.
- ``sequence_parallel_norms`` (the hook form of ``reduce_norm_grads``), ``save_shard_regather``,
  ``parallelize_block``,
  ``vocab_parallel_head``, ``tp_activation_breakdown``, ``kv_heads_per_rank``.
- ``tp_generators(seed, group, *, sp=False)`` (module ``rng``): Megatron-LM's two random streams
  for dropout, the same outside the regions and per rank inside (our Llama has no dropout).
"""

from typing import TYPE_CHECKING

from minitorch_dist.lazy import attach

if TYPE_CHECKING:  # what an editor follows; attach() imports each name on first use
    from minitorch_dist.models.configs import padded_vocab_size

    from .cost import (
        kv_heads_per_rank,
        tp_activation_breakdown,
        tp_activation_bytes,
        tp_bytes,
        tp_comm_bytes,
    )
    from .functions import (
        CopyToTP,
        GatherFromSP,
        ReduceFromTP,
        ReduceScatterToSP,
        ScatterToSP,
        copy_to_tp,
        gather_from_sp,
        reduce_from_tp,
        reduce_scatter_to_sp,
        scatter_to_sp,
    )
    from .layers import ColumnParallelLinear, RowParallelLinear
    from .measure import compare_with_reference, count_tp_bytes, measure_tp_activations, tp_shards
    from .model import apply_tensor_parallel, check_tp_config, parallelize_block, tp_loss_fn
    from .overlap import collective_matmul, tp_backward_timeline
    from .rng import tp_generators
    from .sequence import reduce_norm_grads, save_shard_regather, sequence_parallel_norms
    from .vocab import (
        VocabParallelCrossEntropy,
        VocabParallelEmbedding,
        vocab_parallel_cross_entropy,
        vocab_parallel_head,
    )

__getattr__, __dir__ = attach(__name__)  # __all__: the names imported above
