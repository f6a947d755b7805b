"""Expert parallelism (chapter 10, lab 10): the top-k router and the load-balancing loss,
capacity and token dropping, dispatch and combine over all-to-all, the expert-parallel MoE layer.

    model = use_moe(Llama(cfg), MoEConfig(experts=4, top_k=2, expert_ffn=88))  # models.moe
    apply_expert_parallel(model, group)    # in place: rank r keeps experts r*E/ep ... of each block

The router and the load-balancing loss (lab10.1), capacity and the drop policy (lab10.2) are
written beside the model, in ``minitorch_dist.models.routing`` and ``.capacity``, because the
single-process MoE block routes with them too; this package exports them. Modules:
``dispatch`` (lab10.3), ``layer`` (lab10.4), ``cost`` (bytes in closed form), ``measure``
(against the reference harness; bytes from the real split sizes; step time), ``train``
(training with the auxiliary loss, the load imbalance per step). The figures live in
``minitorch_dist.expert_parallel.plots`` (not imported here). The MoE block itself, with no
parallel code, is ``minitorch_dist.models.moe``.
"""

from typing import TYPE_CHECKING

from minitorch_dist.lazy import attach

if TYPE_CHECKING:  # what an editor follows; attach() imports each name on first use
    from minitorch_dist.models.capacity import expert_capacity
    from minitorch_dist.models.routing import (
        LOSS_STYLES,
        apply_capacity,
        load_balancing_loss,
        top_k_route,
    )

    from .cost import (
        ALL_TO_ALLS_PER_STEP,
        all_to_all_bytes,
        all_to_alls_per_step,
        capacity_buffer_bytes,
        ep_step_bytes,
    )
    from .dispatch import AllToAll, combine, dispatch, exchange_counts
    from .layer import DISPATCH_MODES, ExpertParallelMoE, apply_expert_parallel, local_experts

__getattr__, __dir__ = attach(__name__)  # __all__: the names imported above
