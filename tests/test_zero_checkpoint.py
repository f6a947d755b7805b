"""Checkpoints of ZeRO runs through torch.distributed.checkpoint (:mod:`minitorch_dist.checkpoint`).

A run stopped at step k, saved, and resumed must end where the uninterrupted run ends: bit for
bit on the same number of ranks (nothing is recomputed differently), fp32-tight on another
number of ranks (the gradient's sum over ranks is taken in another order), and both against
the single-process reference of the shared harness. A rank killed while saving must leave the
previous checkpoint loadable. Not graded.
"""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

from minitorch_dist import launch
from minitorch_dist.data_parallel import DataParallelBucket, TiedToy
from minitorch_dist.reference import (
    assert_runs_match,
    make_batches,
    param_values,
    reference_run,
    run_training,
)
from minitorch_dist.zero import STAGES, apply_zero3
from minitorch_dist.zero.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint

STEPS, GBS, SEQ, VOCAB = 4, 8, 8, 31
TIGHT = {"atol": 1e-5, "rtol": 1e-4}
ADAMW = {"lr": 1e-2, "weight_decay": 0.1}


def _toy() -> nn.Module:
    return TiedToy(vocab=VOCAB, hidden=5)  # a tied weight, a frozen layer, odd counts


def _rank(
    rank: int,
    world_size: int,
    path: str,
    stage: int,
    stop: int,
    resume: bool,
    save: bool,
    sharded: bool = False,
    die: bool = False,
) -> dict:
    """Build the model and ZeRO optimizer, load the checkpoint (``resume``), train up to step
    ``stop``, save (``save``; rank 1 dies half-way through with ``die``)."""
    torch.manual_seed(0)
    model = _toy()
    opt = STAGES[stage](model.parameters(), torch.optim.AdamW, **ADAMW)
    start = load_checkpoint(path, model, opt) if resume else 0
    batches = make_batches(VOCAB, GBS, SEQ, STEPS)[start:stop]
    run = run_training(model, opt, batches, rank=rank, world_size=world_size)
    if die and rank == 1:
        from torch.distributed.checkpoint.filesystem import FileSystemWriter

        FileSystemWriter.write_data = lambda *args, **kwargs: os._exit(3)  # killed mid-save
    if save:
        save_checkpoint(path, model, opt, step=stop, sharded=sharded)
    return {"start": start, "run": run}


def _reference():  # noqa: ANN202
    return reference_run(
        _toy, lambda ps: torch.optim.AdamW(ps, **ADAMW), make_batches(VOCAB, GBS, SEQ, STEPS)
    )


@pytest.mark.parametrize("stage", [1, 2])
def test_saved_on_4_ranks_resumes_on_2_and_on_4(tmp_path, stage):
    """Catches a checkpoint of one rank's shard only (the resumed run would miss 3/4 of Adam's
    m and v), a step counter or learning rate lost on resume, shards put back at the wrong
    offsets when there are fewer, bigger ones: resumed on 4 ranks the run is bit-identical to
    the uninterrupted one, resumed on 2 it is fp32-tight, and both match one process."""
    full = launch(_rank, 4, str(tmp_path / "none"), stage, STEPS, False, False)
    launch(_rank, 4, str(tmp_path), stage, 2, False, True)  # stop at step 2, save
    same = launch(_rank, 4, str(tmp_path), stage, STEPS, True, False)
    fewer = launch(_rank, 2, str(tmp_path), stage, STEPS, True, False)
    assert [r["start"] for r in same + fewer] == [2] * 6
    for a, b in zip(full, same):
        for name, w in a["run"].weights.items():
            assert torch.equal(w, b["run"].weights[name]), name
    assert_runs_match([r["run"] for r in fewer], _reference(), check=("weights",), tolerance=TIGHT)
    for name, w in full[0]["run"].weights.items():
        torch.testing.assert_close(fewer[0]["run"].weights[name], w, **TIGHT)


def test_sharded_checkpoint_resumes_bit_identical_and_refuses_another_world_size(tmp_path):
    """Catches a sharded (per-rank) checkpoint that loads on the wrong number of ranks and
    silently trains with the wrong shards: the same world size resumes bit-identically,
    another raises a ValueError naming world_size."""
    full = launch(_rank, 4, str(tmp_path / "none"), 2, STEPS, False, False)
    launch(_rank, 4, str(tmp_path), 2, 2, False, True, True)
    same = launch(_rank, 4, str(tmp_path), 2, STEPS, True, False)
    for a, b in zip(full, same):
        for name, w in a["run"].weights.items():
            assert torch.equal(w, b["run"].weights[name]), name
    with pytest.raises(Exception, match="world_size=4 ranks, this run has world_size=2"):
        launch(_rank, 2, str(tmp_path), 2, STEPS, True, False)


def test_a_rank_killed_while_saving_leaves_the_last_checkpoint(tmp_path):
    """Catches a save that overwrites the last checkpoint in place: rank 1 dies half-way
    through saving step 4; the checkpoint of step 2 still loads, whole, on both ranks."""
    saved = launch(_rank, 2, str(tmp_path), 2, 2, False, True)
    with pytest.raises(Exception, match="rank 1"):
        launch(_rank, 2, str(tmp_path), 2, STEPS, True, True, False, True, timeout=60)
    assert latest_checkpoint(tmp_path).name == "step_00000002"
    assert (tmp_path / ".tmp-step_00000004").exists()  # the half-written one, never named
    resumed = launch(_rank, 2, str(tmp_path), 2, 2, True, False)  # load, train 0 steps
    for a, b in zip(saved, resumed):
        assert b["start"] == 2
        for name, w in a["run"].weights.items():
            assert torch.equal(w, b["run"].weights[name]), name


def _ddp_rank(rank: int, world_size: int, path: str, stop: int, resume: bool) -> dict:
    torch.manual_seed(0)
    model = DataParallelBucket(_toy(), bucket_cap_mb=None)
    opt = torch.optim.AdamW(model.parameters(), **ADAMW)  # replicated: its own state dict
    start = load_checkpoint(path, model, opt) if resume else 0
    run = run_training(
        model,
        opt,
        make_batches(VOCAB, GBS, SEQ, STEPS)[start:stop],
        rank=rank,
        world_size=world_size,
        weights=lambda m, o: param_values(m.module),
    )
    if not resume:
        save_checkpoint(path, model, opt, step=stop)
    return {"start": start, "run": run}


def test_data_parallel_with_a_torch_optimizer_resumes_on_fewer_ranks(tmp_path):
    """Catches a wrapper whose state dict keys do not load back into the module (``module.``
    prefixes) or a torch optimizer's state lost: DDP + AdamW saved on 4 ranks, resumed on 2,
    ends fp32-tight to one process."""
    launch(_ddp_rank, 4, str(tmp_path), 2, False)
    resumed = launch(_ddp_rank, 2, str(tmp_path), STEPS, True)
    assert [r["start"] for r in resumed] == [2, 2]
    assert_runs_match(
        [r["run"] for r in resumed], _reference(), check=("weights",), tolerance=TIGHT
    )


def _zero3_rank(rank: int, world_size: int, path: str, stop: int, resume: bool) -> dict:
    torch.manual_seed(0)
    model = apply_zero3(_toy())
    opt = torch.optim.AdamW(model.parameters(), **ADAMW)  # over the local shards
    start = load_checkpoint(path, model, opt) if resume else 0
    run = run_training(
        model,
        opt,
        make_batches(VOCAB, GBS, SEQ, STEPS)[start:stop],
        rank=rank,
        world_size=world_size,
        weights=lambda m, o: m.gather_full_params(trainable_only=True),
    )
    if not resume:
        save_checkpoint(path, model, opt, step=stop)
    return {"start": start, "run": run}


def test_apply_zero3_saved_on_4_ranks_resumes_on_2_and_on_4(tmp_path):
    """Catches a ZeRO-3 checkpoint that keeps one rank's shards (DCP writes a name once) or
    cuts them back at the wrong offsets: apply_zero3 + AdamW resumed on 4 ranks is bit-identical
    to the uninterrupted run, resumed on 2 fp32-tight to one process."""
    full = launch(_zero3_rank, 4, str(tmp_path / "none"), STEPS, False)
    launch(_zero3_rank, 4, str(tmp_path), 2, False)
    same = launch(_zero3_rank, 4, str(tmp_path), STEPS, True)
    fewer = launch(_zero3_rank, 2, str(tmp_path), STEPS, True)
    assert [r["start"] for r in same + fewer] == [2] * 6
    for a, b in zip(full, same):
        for name, w in a["run"].weights.items():
            assert torch.equal(w, b["run"].weights[name]), name
    assert_runs_match([r["run"] for r in fewer], _reference(), check=("weights",), tolerance=TIGHT)


def _zero3_refused(rank: int, world_size: int, path: str) -> list[str]:
    errors = []
    model = apply_zero3(_toy())
    opt = torch.optim.AdamW(model.parameters())
    for call in (
        lambda: save_checkpoint(path, model, opt, step=1, sharded=True),
        lambda: save_checkpoint(path, _toy(), opt, step=-1),
    ):
        try:
            call()
        except ValueError as e:
            errors.append(str(e))
    return errors


def test_zero3_sharded_and_bad_steps_are_refused(tmp_path):
    """Catches a ZeRO-3 state that DCP would deduplicate as if every rank held the same tensors
    (every rank's piece has the same name): a sharded apply_zero3 checkpoint is refused, as is a
    negative step. (ZeroStage3's model saves whole: tests/test_resume.py.)"""
    errors = launch(_zero3_refused, 2, str(tmp_path))[0]
    assert len(errors) == 2 and "ZeRO-3" in errors[0], errors
    assert "step must be" in errors[1]
    with pytest.raises(ValueError, match="launch"):
        save_checkpoint(tmp_path, _toy(), None, step=0)
