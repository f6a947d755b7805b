"""Pipeline parallelism (chapter 9, lab 9): stages, schedules as data, one runtime, a simulator.

    schedule = make_schedule("1f1b", pp=4, micro_batches=8)    # per-rank action lists
    simulate(schedule).makespan                                 # logical clock: (m + p - 1) * 3
    run = run_schedule(schedule, stage, micro_batches)          # the same lists, on real ranks

Names beyond the chapter-9 API contract of the README (none renamed): ``bubble_share``,
``p2p_bytes``, ``KINDS``, ``check_schedule``, ``ScheduleDeadlock``, ``Message``,
``message_tag``, ``PipelineStage.exchange/forward/backward/backward_weights``,
``logical_events``, ``wall_events``, ``run_pipeline``, ``TINY``/``DEEP`` configs,
``in_flight_over_time``, ``SendLedger`` (when a send may be waited for),
``PipelineStage.wait_sends``; in ``build``, the transform ``apply_pipeline_parallel`` (a
:class:`Pipeline`) and its blocks ``build_stage``, ``stage_parameters``, ``micro_batch_list``
(also importable from ``measure``, their old home); in ``record``, ``RunObserver`` and
``RunRecorder`` (what a run records, attached from outside its loop). The plots live in
``minitorch_dist.pipeline.plots`` (not imported here: the numbers stay free of matplotlib).
"""

from minitorch_dist.lazy import attach

_EXPORTS = {  # module -> the names it provides, imported on first use (minitorch_dist.lazy)
    "minitorch_dist.models.configs": ("split_layers",),
    ".cost": ("bubble_fraction", "bubble_share", "first_stage_activation_factor", "p2p_bytes"),
    ".build": (
        "Pipeline",
        "apply_pipeline_parallel",
        "build_stage",
        "micro_batch_list",
        "stage_parameters",
    ),
    ".measure": ("DEEP", "TINY", "compare_with_reference", "count_pp_bytes", "run_pipeline"),
    ".record": ("PipelineRun", "RunObserver", "RunRecorder"),
    ".runtime": ("logical_events", "run_schedule", "wall_events"),
    ".schedules": ("KINDS", "Action", "Schedule", "check_schedule", "make_schedule"),
    ".sends": ("SendLedger",),
    ".simulate": ("ScheduleDeadlock", "SimResult", "simulate"),
    ".stage": ("Message", "PipelineStage", "message_tag"),
}

__all__ = [
    "DEEP",
    "KINDS",
    "TINY",
    "Action",
    "Message",
    "Pipeline",
    "PipelineRun",
    "PipelineStage",
    "RunObserver",
    "RunRecorder",
    "Schedule",
    "ScheduleDeadlock",
    "SendLedger",
    "SimResult",
    "apply_pipeline_parallel",
    "bubble_fraction",
    "bubble_share",
    "build_stage",
    "check_schedule",
    "compare_with_reference",
    "count_pp_bytes",
    "first_stage_activation_factor",
    "logical_events",
    "make_schedule",
    "message_tag",
    "micro_batch_list",
    "p2p_bytes",
    "run_pipeline",
    "run_schedule",
    "simulate",
    "split_layers",
    "stage_parameters",
    "wall_events",
]

__getattr__, __dir__ = attach(__name__, _EXPORTS, __all__)
