"""Pipeline parallelism (chapter 9, lab 9): stages, schedules as data, one runtime, a simulator.

    schedule = make_schedule("1f1b", pp=4, micro_batches=8)    # per-rank action lists
    simulate(schedule).makespan                                 # logical clock: (m + p - 1) * 3
    run = run_schedule(schedule, stage, micro_batches)          # the same lists, on real ranks

Names beyond the chapter-9 API contract of the README (none renamed): ``bubble_share``,
``p2p_bytes``, ``KINDS``, ``ScheduleDeadlock``, ``Message``,
``PipelineStage.exchange/forward/backward/backward_weights``,
``logical_events``, ``wall_events``, ``run_pipeline``, ``TINY``/``DEEP`` configs,
``in_flight_over_time``, ``SendLedger`` (when a send may be waited for),
``PipelineStage.wait_sends``; in ``build``, the transform ``apply_pipeline_parallel`` (a
:class:`Pipeline`) and its blocks ``build_stage``, ``stage_parameters``, ``micro_batch_list``
(also importable from ``measure``, their old home); in ``record``, ``RunObserver`` and
``RunRecorder`` (what a run records, attached from outside its loop). The plots live in
``minitorch_dist.pipeline.plots`` (not imported here: the numbers stay free of matplotlib).
"""

from typing import TYPE_CHECKING

from minitorch_dist.lazy import attach

if TYPE_CHECKING:  # what an editor follows; attach() imports each name on first use
    from minitorch_dist.models.configs import split_layers

    from .build import (
        Pipeline,
        apply_pipeline_parallel,
        build_stage,
        micro_batch_list,
        stage_parameters,
    )
    from .cost import bubble_fraction, bubble_share, first_stage_activation_factor, p2p_bytes
    from .measure import DEEP, TINY, compare_with_reference, count_pp_bytes, run_pipeline
    from .record import PipelineRun, RunObserver, RunRecorder, logical_events, wall_events
    from .runtime import run_schedule
    from .schedules import KINDS, Action, Schedule, make_schedule
    from .sends import SendLedger
    from .simulate import ScheduleDeadlock, SimResult, simulate
    from .stage import Message, PipelineStage

__getattr__, __dir__ = attach(__name__)  # __all__: the names imported above
