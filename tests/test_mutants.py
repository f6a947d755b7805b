"""Mutants: plausible wrong answers to a task, each of which the task's graded tests must catch.

A mutant replaces one function or method of the reference solution with a wrong version (a
common mistake, written as a student would write it), then grades its task with the real grader
(``grade(tasks=[task])``, the forked ranks inherit the replacement) and asserts that at least one
graded test of that task fails with a message naming the mistake, not merely some tolerance.

To add one: write the wrong implementation below (copy the reference body, make the mistake), and
append a ``Mutant(task, mistake, target, wrong, message)`` to ``MUTANTS``; ``target`` is
``"module:Class.method"`` or ``"module:function"``, ``message`` a regular expression the failure
must contain.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from mutants_classes import MUTANTS_CLASSES
from mutants_common import Mutant, grade_replaced, named, owner_of, package_tasks
from mutants_lab00 import MUTANTS_LAB00
from mutants_labs01_06 import MUTANTS_LABS01_06
from mutants_labs07_10 import MUTANTS_LABS07_10

from minitorch_dist.comm import reduce_scatter_tensor
from minitorch_dist.comm.ring import _exchange
from minitorch_dist.course.grade import task_of
from minitorch_dist.planner.fit import rank_memory as _reference_rank_memory

ROOT = Path(__file__).resolve().parent.parent


# -- lab05.1: the ring ----------------------------------------------------------------------------
def _ring_reduce_scatter(steps_of: Callable, world_size_of: Callable) -> Callable:
    def ring_reduce_scatter(tensor, group=None) -> None:  # noqa: ANN001
        rank, n = dist.get_rank(group), world_size_of(group)
        chunks = tensor.view(-1).tensor_split(n)
        for step in range(steps_of(n)):
            out, inc = (rank - step - 1) % n, (rank - step - 2) % n
            buf = torch.empty_like(chunks[inc])
            _exchange(chunks[out].contiguous(), buf, group)
            chunks[inc].add_(buf)

    return ring_reduce_scatter


# -- lab05.2: naive data parallelism ------------------------------------------------------------
def _naive_sync_summed(self) -> None:  # noqa: ANN001
    if not self._start_sync():
        return
    for p in self.params:
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM, group=self.group)  # no / world_size
    self._end_sync()


# -- lab05.3: bucketed data parallelism --------------------------------------------------------
def _bucketed_sync_summed(self) -> None:  # noqa: ANN001
    if not self._start_sync():
        return
    for bucket in self.buckets:
        bucket.work.wait()  # no / world_size
        for i, p in enumerate(bucket.params):
            p.grad = bucket.slot(i)
        bucket.ready = [False] * len(bucket.params)
        bucket.work = None
    self._next = 0
    self._end_sync()


# -- lab06.1: ZeRO-1 ------------------------------------------------------------------------------
def _stage1_reduce_summed(self) -> None:  # noqa: ANN001
    for u in self.units:
        u.collect_grads()
        lo, hi = u.shard_range(self.rank)
        reduce_scatter_tensor(u.flat_grad[lo:hi], u.flat_grad, group=self.group)  # no / N


# -- lab06.2: ZeRO-2's gradient shard ---------------------------------------------------------
def _stage2_reduce(average: bool, accumulate: bool) -> Callable:
    @torch.no_grad()
    def reduce_unit(self, unit) -> None:  # noqa: ANN001
        flat = unit.grad_shard.new_zeros(unit.padded_numel)
        for p, view in zip(unit.params, unit.views(flat)):
            if p.grad is not None:
                view.copy_(p.grad)
                p.grad = None
        summed = torch.empty_like(unit.grad_shard)
        reduce_scatter_tensor(summed, flat, group=self.group)
        if average:
            summed.div_(self.world_size)
        if accumulate:
            unit.grad_shard.add_(summed)
        else:
            unit.grad_shard.copy_(summed)  # the last micro-batch overwrites the others
        unit.ready.clear()

    return reduce_unit


# -- lab11.1: the grid's gradient norm ---------------------------------------------------------
def _grid_norm_not_over_pp(optimizer, grid, counted):  # noqa: ANN001, ANN202
    sq = torch.zeros((), dtype=torch.float64)
    for unit, mask in zip(optimizer.units, counted):
        sq += (mask * unit.shard.grad.double() ** 2).sum()
    dist.all_reduce(sq, group=grid.group("dp_cp"))
    dist.all_reduce(sq, group=grid.group("tp"))  # the other stages' layers are left out
    return sq.sqrt()


# -- lab12.1: the fit test -------------------------------------------------------------------------
def _rank_memory_zero_not_sharded(model, config, *, seq_len, global_batch, stage=0):  # noqa: ANN001, ANN202
    return _reference_rank_memory(
        model,
        dataclasses.replace(config, zero=0),
        seq_len=seq_len,
        global_batch=global_batch,
        stage=stage,
    )


# -- lab12.2: ranking ------------------------------------------------------------------------------
def _rank_by_memory(rows):  # noqa: ANN001, ANN202
    fitting = sorted((r for r in rows if r.fits), key=lambda r: (r.memory["total"], r.config.key()))
    return fitting + sorted((r for r in rows if not r.fits), key=lambda r: r.config.key())


SUMMED = r"summed over the ranks, not averaged"
_GROUP_SIZE = lambda group: dist.get_world_size(group)  # noqa: E731
MUTANTS = [
    Mutant(
        "lab05.1",
        "n-steps",
        "minitorch_dist.comm.ring:ring_reduce_scatter",
        _ring_reduce_scatter(lambda n: n, _GROUP_SIZE),
        r"n steps instead of n - 1",
    ),
    Mutant(
        "lab05.1",
        "global-world-size",
        "minitorch_dist.comm.ring:ring_reduce_scatter",
        _ring_reduce_scatter(lambda n: n - 1, lambda group: dist.get_world_size()),
        r"not the global rank or world size",
    ),
    Mutant(
        "lab05.2",
        "no-averaging",
        "minitorch_dist.data_parallel.naive:DataParallelNaive.finish_gradient_synchronization",
        _naive_sync_summed,
        SUMMED,
    ),
    Mutant(
        "lab05.3",
        "no-averaging",
        "minitorch_dist.data_parallel.bucketed:DataParallelBucket.finish_gradient_synchronization",
        _bucketed_sync_summed,
        SUMMED,
    ),
    Mutant(
        "lab06.1",
        "no-averaging",
        "minitorch_dist.zero.stage1:ZeroStage1._reduce_gradients",
        _stage1_reduce_summed,
        SUMMED,
    ),
    Mutant(
        "lab06.2",
        "no-averaging",
        "minitorch_dist.zero.stage2:UnitwiseGradients._reduce_unit",
        _stage2_reduce(average=False, accumulate=True),
        SUMMED,
    ),
    Mutant(
        "lab06.2",
        "copy-not-add",
        "minitorch_dist.zero.stage2:UnitwiseGradients._reduce_unit",
        _stage2_reduce(average=True, accumulate=False),
        r"do not overwrite it \(copy_\)",
    ),
    Mutant(
        "lab11.1",
        "norm-not-over-pp",
        "minitorch_dist.parallel3d.clip:grid_grad_norm",
        _grid_norm_not_over_pp,
        r"gradient norm: Tensor-likes are not close(.|\n)*all-reduced over dp x cp",
    ),
    Mutant(
        "lab12.1",
        "zero-not-sharded",
        "minitorch_dist.planner.fit:rank_memory",
        _rank_memory_zero_not_sharded,
        r"ZeRO shards over dp",
    ),
    Mutant(
        "lab12.2",
        "rank-by-memory",
        "minitorch_dist.planner.search:rank",
        _rank_by_memory,
        r"by predicted step time",
    ),
]


ALL_MUTANTS = [
    *MUTANTS_LAB00,
    *MUTANTS,
    *MUTANTS_LABS01_06,
    *MUTANTS_LABS07_10,
    *MUTANTS_CLASSES,
]


@pytest.mark.parametrize("mutant", ALL_MUTANTS, ids=lambda m: f"{m.task}-{m.mistake}")
def test_the_tasks_graded_tests_catch_the_mutant(
    mutant: Mutant, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = grade_replaced(
        mutant.task, {mutant.target: mutant.wrong}, monkeypatch, mutant.message, every=mutant.every
    )
    failed = [r for r in results if r.status == "failed"]
    assert failed, f"every graded test of {mutant.task} passes with the mutant {mutant.mistake}"
    naming = named(failed, mutant.message)
    assert naming, (
        f"{len(failed)} tests of {mutant.task} fail, none naming the mistake "
        f"({mutant.message!r}); their reasons:\n" + "\n".join(r.reason for r in failed)
    )
    unnamed = [r.reason for r in failed if mutant.every and r not in naming]
    assert not unnamed, f"tests of {mutant.task} fail without naming {mutant.mistake}: {unnamed}"


def test_every_mutant_targets_the_reference_it_replaces() -> None:
    """Guards the meta-test itself: a renamed method would leave the mutant unused."""
    for mutant in ALL_MUTANTS:
        owner, name = owner_of(mutant.target)
        assert callable(getattr(owner, name))


class _GradedTasks:
    """A pytest plugin that keeps the task id of every collected graded test."""

    def __init__(self) -> None:
        self.tasks: set[str] = set()

    @pytest.hookimpl(trylast=True)  # after ``-m`` deselected the other labs' tests
    def pytest_collection_modifyitems(self, items: list) -> None:
        self.tasks |= {task for task in map(task_of, items) if task}


def test_every_graded_task_has_a_mutant() -> None:
    """Catches a graded task (a ``@pytest.mark.task`` of a graded test) that no mutant checks:
    its tests might pass a common wrong answer unnoticed. The tasks are those with a solution
    block in the package (the markers), and each must have graded tests."""
    tasks = set(package_tasks())
    labs = sorted({task.split(".")[0] for task in tasks})
    plugin = _GradedTasks()
    args = [
        str(ROOT / "tests"),
        "--collect-only",
        "-q",
        "-m",
        " or ".join(labs),
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(ROOT),
        "-o",
        "addopts=",
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        code = pytest.main(args, plugins=[plugin])
    assert code == pytest.ExitCode.OK, f"collecting the graded tests failed ({code})"
    assert plugin.tasks == tasks, (
        f"tasks with a solution block but no graded test: {sorted(tasks - plugin.tasks)}; "
        f"graded tests of a task without a solution block: {sorted(plugin.tasks - tasks)}"
    )
    missing = sorted(tasks - {m.task for m in ALL_MUTANTS})
    assert not missing, f"graded tasks without a mutant: {missing}"


# Tasks whose mutants still cover a single class of mistake (each mutant below it and in
# tests/mutants_*.py names its class): add one of another class, then remove the task here.
ONE_CLASS_ONLY: set[str] = set()


def test_every_task_has_mutants_of_two_classes_of_mistake() -> None:
    """Catches a task whose wrong answers are all of one kind (tests written against one
    mistake pass others): every task has a mutant in tests/mutants_classes.py, a class of
    mistake besides its first mutant's, unless ONE_CLASS_ONLY lists it (and then it has none)."""
    second = {m.task for m in MUTANTS_CLASSES}
    tasks = set(package_tasks())
    missing = sorted(tasks - second - ONE_CLASS_ONLY)
    assert not missing, f"tasks without a mutant in tests/mutants_classes.py: {missing}"
    stale = sorted(ONE_CLASS_ONLY & second)
    assert not stale, f"ONE_CLASS_ONLY lists tasks that now have a second class: {stale}"
