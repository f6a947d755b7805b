"""The planner (chapter 12, lab 12): which dp x tp x pp x cp (x ep) layout to train a model with.

    cluster = Cluster.from_preset("dgx-h100", gpus=1024)
    result = plan("llama-3-70b", cluster, global_batch=1024, seq_len=4096)
    result.best                       # the fastest configuration that fits
    result.rows[0].time.total         # its predicted step time, seconds

The one place besides ``parallel3d`` that composes the techniques: it reads the memory estimator
(:mod:`.fit`), each technique's communication closed form and the pipeline's bubble (:mod:`.cost`)
and a two-level link model (:mod:`.cluster`), enumerates every layout (:mod:`.search`), and
compares its choice with published runs (:mod:`.published`). Beside Korthikanti's textbook
activations it has an exact count of what the package's own code stores (:mod:`.exact`,
``activations="exact"``), held against that code run on fake tensors and a fake process group
(:mod:`.vs_code`, ``benchmarks/planner_vs_code.py``).
"""

from typing import TYPE_CHECKING

from minitorch_dist.lazy import attach

if TYPE_CHECKING:  # what an editor follows; attach() imports each name on first use
    from .cluster import CLUSTER_PRESETS, Cluster, Link
    from .config import (
        HSDP_SYNC,
        RECOMPUTE,
        RESHARD,
        ParallelConfig,
        in_flight,
        micro_batches,
        strides,
        validate,
    )
    from .cost import StepTime, comm_bytes, step_time
    from .exact import exact_rank_memory
    from .fit import ACTIVATIONS, fits, peak_memory, rank_memory
    from .hsdp import hsdp_comm_bytes, replica_all_reduce_bytes
    from .model import PlannerModel, as_model
    from .overlap import TP_OVERLAP, Overlap, Term, as_overlap
    from .published import (
        PUBLISHED,
        Published,
        Verdict,
        comparable_tflops,
        completions,
        evaluate_published,
        recorded_verdict,
    )
    from .search import Choice, Plan, Row, batch_warning, choose, layouts, plan, rank

__getattr__, __dir__ = attach(__name__)  # __all__: the names imported above
