"""Shared test set-up, and the graded tests' rules (see minitorch_dist/course/grade.py's docstring).

* ``--task lab05.1`` (repeatable) keeps only that task's graded tests: ``pytest -m lab05 --task
  lab05.1`` grades one task, as ``python -m minitorch_dist.grade --task lab05.1`` does.
* In a graded test every collective times out after ``GRADED_COLLECTIVE_TIMEOUT_S`` seconds (the
  tensors are tiny: a collective that takes longer never completes), and once a test of a task
  failed on such a timeout, the task's later tests fail at once, without running.
"""

from __future__ import annotations

import atexit
import gc

gc.disable()  # while torch and the test modules are imported: see pytest_collection_finish

import pytest  # noqa: E402
import torch  # noqa: E402

from minitorch_dist.course.grade import check_task_ids, lab_of, select_tasks, task_of  # noqa: E402
from minitorch_dist.course.kernel_gc import unfreeze_if_counted  # noqa: E402
from minitorch_dist.launching import (  # noqa: E402
    COLLECTIVE_TIMEOUT_ENV,
    RankError,
    RankTimeoutError,
)

GRADED_COLLECTIVE_TIMEOUT_S = 10
_deadlocked: dict[str, str] = {}  # task -> the test in which it deadlocked


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--task",
        action="append",
        default=[],
        help="run only the graded tests of this task, e.g. --task lab05.1 (repeatable)",
    )


# Tests of the course and book machinery rather than of what the chapters teach: marked ``course``
# so that ``python -m minitorch_dist.make quick`` (``-m "not slow and not course"``) leaves them out.
COURSE_MODULES = {
    "test_autograder",
    "test_book_links",
    "test_book_outputs",
    "test_browser_check",
    "test_course_book",
    "test_grade_dependencies",
    "test_grading",
    "test_mutants",
    "test_no_reference",
    "test_notebooks",
    "test_release",
    "test_student_install",
    "test_stuck",
    "test_vendor",
}


# Integration tests (whole training runs, many launches) that take more than about 5 s on two
# busy cores, measured with ``pytest --durations``: marked ``slow`` here by name (every parameter
# set), so that ``make quick`` stays within three minutes; ``make test`` runs them. Each graded
# task keeps graded tests in quick (lab11.1: the layout test of test_lab11_grid.py, its fastest).
# tests/test_layout.py checks that each name is a test.
SLOW_TESTS = {
    "test_accumulate.py::test_peak_memory_follows_the_micro_batch_not_the_global_batch",
    "test_ch12_planner_exercises.py::test_chapter_ex3_slower_ports_cost_the_old_choice_more",
    "test_comm_cost_viz.py::test_live_collectives_leave_what_the_figure_says",
    "test_comm_cost_viz.py::test_simulated_ring_ends_with_every_sum_everywhere",
    "test_context_parallel.py::test_ring_keeps_less_than_allgather",
    "test_context_parallel_hybrid.py::test_hybrid_degenerates_to_ring_and_to_ulysses",
    "test_data_parallel.py::test_bucketed_matches_single_process_adamw_and_llama",
    "test_data_parallel.py::test_naive_matches_single_process",
    "test_expert_parallel.py::test_tiny_llama_with_moe_trains_like_its_reference",
    "test_lab00_hello.py::test_launch_errors_print_no_machine_paths",
    "test_lab01_exercises.py::test_lab_ex3_pure_bf16_adam_is_8_bytes_per_param",
    "test_lab03_exercises.py::test_lab3_exercise_answers",
    "test_lab11_grid.py::test_cp_pp_tp_trains_like_one_process",
    "test_lab11_grid.py::test_dp_pp_tp_trains_like_one_process",
    "test_lab11_grid.py::test_fp32_trains_like_one_process",
    "test_lab12_planner.py::test_choose_respects_memory",
    "test_lab12_planner.py::test_choose_returns_the_fastest_fitting_config_and_its_numbers",
    "test_launch.py::test_output_of_rank0_by_default_and_all_ranks_in_order",
    "test_launch.py::test_rank_that_skips_a_collective_times_out",
    "test_launch.py::test_results_come_back_in_rank_order",
    "test_launch.py::test_torchrun_runs_the_same_user_function",
    "test_memory_peak.py::test_peak_within_3_percent_of_the_tracker",
    "test_memory_track.py::test_fake_llama_2_7b_is_16_bytes_per_param",
    "test_memory_track.py::test_fake_measurement_equals_closed_form",
    "test_memory_track.py::test_fake_recompute_policies",
    "test_models.py::test_tiny_model_learns_markov_data_quickly",
    "test_moe_bias.py::test_bias_balances_the_skewed_problem_and_the_loss_free_run_has_no_aux_term",
    "test_package_layout.py::test_importing_the_numbers_does_not_import_matplotlib",
    "test_parallel3d.py::test_each_pitfall_fails_the_comparison",
    "test_pipeline.py::test_schedule_matches_one_process",
    "test_pipeline.py::test_zb_h1_matches_one_process",
    "test_pipeline_memory.py::test_peak_is_the_schedules_micro_batches_in_flight",
    "test_planner.py::test_70b_on_1024_gpus_is_planned_quickly",
    "test_planner.py::test_planner_memory_benchmark_runs_on_the_cpu",
    "test_planner.py::test_planner_widget_follows_its_controls",
    "test_planner_vs_code.py::test_exact_planner_within_five_percent_of_the_code",
    "test_planner_vs_code.py::test_measure_leaves_no_process_group_and_no_patched_exchange",
    "test_tensor_parallel.py::test_megatron_regather_saves_shards_for_two_more_all_gathers",
    "test_viz.py::test_package_imports_without_ipywidgets",
    "test_zero_checkpoint.py::test_apply_zero3_saved_on_4_ranks_resumes_on_2_and_on_4",
}


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection built (torch, the package, every test module) out of the garbage
    collector's reach: each full collection would otherwise walk those hundreds of thousands of
    objects again, about 10 to 15 % of a test file's CPU on a 2-core VM (tests/test_zero.py:
    23.3 s of user time, 19.6 s frozen). Objects the tests create are collected as before.

    Until now the collector was off (the top of this file): importing creates objects that live
    as long as the process, and collecting while they are made walks them again and again. A
    collection of ``tests/`` spent about 2 s of its 10 s of CPU in the collector on a 2-core VM,
    0.6 s (this one collection) with it off. pytest calls this hook even when collection fails."""
    gc.collect()
    gc.freeze()
    gc.enable()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Before the interpreter exits, hand the frozen objects back where bindings count theirs:
    at exit, not here, since a test may run pytest inside this process (the grader does), and
    that session's end must not unfreeze this one's objects mid-run."""
    atexit.register(unfreeze_if_counted)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem in COURSE_MODULES:
            item.add_marker(pytest.mark.course)
        if f"{item.path.name}::{getattr(item, 'originalname', item.name)}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
    tasks = config.getoption("--task")
    if tasks:
        check_task_ids(tasks)
        select_tasks(items, config, tasks)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    """One intra-op thread: on a busy 2-core machine, two threads make small ops 20x slower."""
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _graded_collective_timeout(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graded test's collectives fail within seconds when they cannot complete."""
    if lab_of(request.node):
        monkeypatch.setenv(COLLECTIVE_TIMEOUT_ENV, str(GRADED_COLLECTIVE_TIMEOUT_S))


def pytest_runtest_setup(item: pytest.Item) -> None:
    task = task_of(item) if lab_of(item) else None
    if task in _deadlocked:
        pytest.fail(
            f"not run: {task} deadlocked in {_deadlocked[task]} (a collective never completed); "
            "fix that test first",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.when == "call" and call.excinfo is not None and lab_of(item) and task_of(item):
        error = call.excinfo.value
        stuck = isinstance(error, RankTimeoutError) or (  # or a rank's own receive timed out
            isinstance(error, RankError) and error.exc_type == "TimeoutError"
        )
        if stuck:
            _deadlocked.setdefault(task_of(item), item.nodeid.split("::", 1)[-1])
    return report
