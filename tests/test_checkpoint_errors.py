"""What a checkpoint load says when something is wrong (:mod:`minitorch_dist.checkpoint`).

``latest`` naming a missing or incomplete directory falls back to the newest complete checkpoint
with a warning that names it and why; a corrupted file is named ("checksum mismatch"), not an
unpickling error; the lowest failing rank's own exception heads an error inside
``torch.distributed.checkpoint``, not ``CheckpointException ranks:dict_keys([0, 1])``; a load
into a model with other keys or shapes is refused before anything is written, unless
``strict=False``. Not graded.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from test_checkpoint_crash import VOCAB, _loaded, _same, _state, _trained
from torch import nn
from torch.distributed.checkpoint.filesystem import FileSystemReader, FileSystemWriter

from minitorch_dist import launch
from minitorch_dist.data_parallel import TiedToy
from minitorch_dist.zero.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint


def _by_rank_0(action) -> None:  # noqa: ANN001
    """Change the files on rank 0 while the others wait."""
    dist.barrier()
    if dist.get_rank() == 0:
        action()
    dist.barrier()


def _fallback(rank: int, world_size: int, path: str) -> dict:
    model, opt = _trained(rank, world_size, 1)
    save_checkpoint(path, model, opt, step=2)
    saved = _state(model, opt)
    save_checkpoint(path, *_trained(rank, world_size, 2), step=4)
    root, out = Path(path), {}
    _by_rank_0(lambda: os.remove(root / "step_00000004" / "complete.json"))  # a save cut short
    step, got, out["incomplete"] = _loaded(path, rank, world_size)
    assert step == 2 and _same(got, saved), "the fallback did not load step 2 whole"
    _by_rank_0(lambda: shutil.rmtree(root / "step_00000004"))
    step, got, out["missing"] = _loaded(path, rank, world_size)
    assert step == 2 and _same(got, saved), "the fallback did not load step 2 whole"
    _by_rank_0(lambda: shutil.rmtree(root / "step_00000002"))
    try:
        _loaded(path, rank, world_size)
    except ValueError as e:
        out["none"] = str(e)
    return out


def test_latest_naming_an_incomplete_or_missing_checkpoint_falls_back_and_says_why(tmp_path):
    """Catches a load that fails with a bare FileNotFoundError of ``.metadata`` when ``latest``
    names a checkpoint a crash or a user took away, or one that silently loads another: the
    newest complete one loads, whole, with a warning naming the directory and the reason; with
    none left the error says so."""
    out = launch(_fallback, 2, str(tmp_path))[1]
    assert len(out["incomplete"]) == 1, out["incomplete"]
    assert "step_00000004, which has no complete.json" in out["incomplete"][0]
    assert (
        "loading " in out["incomplete"][0] and "step_00000002, the newest" in out["incomplete"][0]
    )
    assert "step_00000004, which is missing" in out["missing"][0]
    assert out["none"].startswith(f"no complete checkpoint under {tmp_path}"), out["none"]
    assert latest_checkpoint(tmp_path) is None and latest_checkpoint(tmp_path / "none") is None


def test_latest_checkpoint_warns_when_it_falls_back(tmp_path):
    """Catches ``latest_checkpoint`` (not a collective) disagreeing with what loads."""
    for name in ("step_00000002", "step_00000003"):
        (tmp_path / name).mkdir()
    (tmp_path / "step_00000002" / "complete.json").write_text('{"step": 2, "files": {}}')
    (tmp_path / "latest").write_text("step_00000003")
    with pytest.warns(UserWarning, match="step_00000003, which has no complete.json"):
        assert latest_checkpoint(tmp_path) == tmp_path / "step_00000002"


def _corrupt(rank: int, world_size: int, path: str, name: str, truncate: bool) -> str:
    model, opt = _trained(rank, world_size, 1)
    save_checkpoint(path, model, opt, step=2)
    target = Path(path) / "step_00000002" / name

    def damage() -> None:
        data = bytearray(target.read_bytes())
        data = data[: len(data) // 2] if truncate else data
        data[len(data) // 2 : len(data) // 2 + 8] = b"\xff" * 8
        target.write_bytes(bytes(data))

    _by_rank_0(damage)
    try:
        load_checkpoint(path, model, opt)
    except ValueError as e:
        return str(e)
    return "loaded"


@pytest.mark.parametrize(
    "name,truncate", [("__1_0.distcp", False), (".metadata", False), ("__0_0.distcp", True)]
)
def test_a_corrupted_file_is_named(tmp_path, name, truncate):
    """Catches overwritten bytes surfacing as a UnicodeDecodeError deep in unpickling, or worse
    as wrong weights: every rank raises a ValueError naming the file and the checksum."""
    errors = launch(_corrupt, 2, str(tmp_path), name, truncate)
    for error in errors:
        assert error.startswith("checksum mismatch in ") and name in error, error
        assert "delete" in error and "step_00000002" in error, error


def _denied(rank: int, world_size: int, path: str, where: str) -> tuple[str, str, str]:
    """Rank 1 cannot write (or read) its file: what does every rank raise?"""
    model, opt = _trained(rank, world_size, 1)
    if where == "load":
        save_checkpoint(path, model, opt, step=2)
    cls, method = (
        (FileSystemWriter, "write_data") if where == "save" else (FileSystemReader, "read_data")
    )
    if rank == 1:

        def refuse(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            raise PermissionError(13, "Permission denied", str(Path(path) / "__1_0.distcp"))

        setattr(cls, method, refuse)
    try:
        if where == "save":
            save_checkpoint(path, model, opt, step=2)
        else:
            load_checkpoint(path, model, opt)
    except BaseException as e:  # noqa: BLE001 - DCP's CheckpointException is no Exception
        return type(e).__name__, str(e).splitlines()[0], type(e.__cause__).__name__
    return "nothing", "", ""


@pytest.mark.parametrize("where", ["save", "load"])
def test_the_first_failing_ranks_error_heads_a_dcp_failure(tmp_path, where):
    """Catches DCP's headline ``CheckpointException ranks:dict_keys([1])`` hiding the cause:
    every rank raises rank 1's PermissionError, its message first, DCP's exception chained."""
    for got in launch(_denied, 2, str(tmp_path), where):
        assert got == (
            "PermissionError",
            f"[Errno 13] Permission denied: '{tmp_path / '__1_0.distcp'}'",
            "CheckpointException",
        ), got


class _Bigger(TiedToy):
    def __init__(self, **kwargs) -> None:  # noqa: ANN003
        super().__init__(**kwargs)
        self.extra = nn.Linear(2, 2)


def _strict(rank: int, world_size: int, path: str) -> dict:
    model, opt = _trained(rank, world_size, 1)
    save_checkpoint(path, model, None, step=1)  # the model only
    out = {}
    torch.manual_seed(1)
    for name, other in [
        ("missing", _Bigger(vocab=VOCAB, hidden=5)),
        ("unexpected", nn.Sequential()),
        ("shape", TiedToy(vocab=VOCAB, hidden=6)),
    ]:
        before = {k: v.clone() for k, v in other.state_dict().items()}
        try:
            load_checkpoint(path, other, None)
        except ValueError as e:
            out[name] = str(e)
        after = other.state_dict()
        assert all(torch.equal(before[k], after[k]) for k in before), "refused, yet written"
    try:
        load_checkpoint(path, model, opt)
    except ValueError as e:
        out["optimizer"] = str(e)
    bigger = _Bigger(vocab=VOCAB, hidden=5)
    extra = bigger.extra.weight.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out["step"] = load_checkpoint(path, bigger, None, strict=False)
    assert torch.equal(bigger.extra.weight, extra)
    got = {k: v for k, v in bigger.state_dict().items() if not k.startswith("extra.")}
    assert got.keys() == model.state_dict().keys()
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in got.items()), "not loaded"
    return out


def test_model_only_loads_are_strict_by_default(tmp_path):
    """Catches a load that silently ignores keys the model lacks or the checkpoint lacks (the
    model half loaded), or writes half the weights before failing on a shape: a ValueError names
    the keys and shapes and the model is unchanged; ``strict=False`` loads what both have."""
    out = launch(_strict, 2, str(tmp_path))[0]
    assert "missing keys ['extra.bias', 'extra.weight'], unexpected keys []" in out["missing"]
    assert "strict=False" in out["missing"]
    assert "missing keys [], unexpected keys ['down.bias', 'down.weight', " in out["unexpected"]
    assert "down.bias has shape (5,) in the checkpoint, (6,) in the model" in out["shape"]
    assert "holds the model only: load it with optimizer=None" in out["optimizer"]
    assert out["step"] == 1
