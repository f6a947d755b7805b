"""The planner (chapter 11, lab 11): which dp x tp x pp x cp (x ep) layout to train a model with.

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

from minitorch_dist.lazy import attach

_EXPORTS = {  # module -> the names it provides, imported on first use (minitorch_dist.lazy)
    ".cluster": ("CLUSTER_PRESETS", "Cluster", "Link"),
    ".config": ("RECOMPUTE", "ParallelConfig", "in_flight", "micro_batches", "strides", "validate"),
    ".cost": ("StepTime", "comm_bytes", "step_time"),
    ".exact": ("exact_activation_bytes", "exact_rank_memory"),
    ".fit": ("ACTIVATIONS", "fits", "peak_memory", "rank_memory"),
    ".hsdp": ("hsdp_comm_bytes", "replica_all_reduce_bytes"),
    ".model": ("PlannerModel", "as_model"),
    ".published": (
        "PUBLISHED",
        "Published",
        "Verdict",
        "comparable_tflops",
        "completions",
        "evaluate_published",
        "gpt_standin",
        "recorded_verdict",
    ),
    ".search": (
        "Choice",
        "Plan",
        "Row",
        "batch_warning",
        "choose",
        "divisors",
        "layouts",
        "plan",
        "rank",
    ),
}

__all__ = [
    "ACTIVATIONS",
    "exact_activation_bytes",
    "exact_rank_memory",
    "CLUSTER_PRESETS",
    "PUBLISHED",
    "Published",
    "Verdict",
    "comparable_tflops",
    "completions",
    "evaluate_published",
    "gpt_standin",
    "recorded_verdict",
    "Choice",
    "Plan",
    "Row",
    "batch_warning",
    "choose",
    "hsdp_comm_bytes",
    "replica_all_reduce_bytes",
    "divisors",
    "layouts",
    "plan",
    "rank",
    "RECOMPUTE",
    "Cluster",
    "Link",
    "ParallelConfig",
    "PlannerModel",
    "StepTime",
    "as_model",
    "comm_bytes",
    "fits",
    "in_flight",
    "micro_batches",
    "peak_memory",
    "rank_memory",
    "step_time",
    "strides",
    "validate",
]

__getattr__, __dir__ = attach(__name__, _EXPORTS, __all__)
