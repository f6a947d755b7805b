"""The files of a checkpoint (:mod:`minitorch_dist.checkpoint`): written so a crash at any instant
leaves one that loads, checked on the way back in, and errors that every rank agrees on.

A checkpoint is a directory ``step_<step>`` (a second save of the same step goes to
``step_<step>-v2``, then ``-v3``, ...; a directory is never written twice). It is *complete*
when its marker ``complete.json`` exists: written last, after every rank's files, it records
each file's size and sha256. The order of a save, and what a crash after each step leaves:

1. every rank writes into ``.tmp-<name>`` (DCP), and hashes its own files; a crash leaves a
   temporary directory that nothing names (the next save deletes it);
2. rank 0 writes the marker into it (a temporary file, fsynced, renamed) and renames the
   directory to ``<name>``, which does not exist yet: a complete checkpoint that ``latest``
   does not name yet;
3. rank 0 replaces the file ``latest`` (fsynced, renamed: atomic on POSIX) -- the commit;
4. only then the superseded versions of the same step go: marker first, so a deletion cut
   short leaves a directory without a marker, which the loader takes for incomplete.

So the checkpoint ``latest`` names exists, whole, until ``latest`` names its replacement.
:func:`resolve` follows ``latest``; when it names a missing or incomplete directory it falls
back to the newest complete checkpoint and says why. :func:`verify` compares each file with its
recorded size and sha256, so a corrupted file is named rather than failing to unpickle.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import pickle
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException

from minitorch_dist.comm.groups import Group
from minitorch_dist.zero.sync import fingerprint

__all__ = ["LATEST", "MARKER", "agreed", "first_cause", "publish", "resolve", "verify"]

LATEST = "latest"
MARKER = "complete.json"
_NAME = re.compile(r"^step_(\d{8})(?:-v(\d+))?$")


def dir_name(step: int, version: int) -> str:
    return f"step_{step:08d}" + (f"-v{version}" if version > 1 else "")


def _parse(name: str) -> tuple[int, int] | None:
    """``(step, version)`` of a checkpoint directory's name, None for any other name."""
    m = _NAME.match(name)
    return (int(m.group(1)), int(m.group(2) or 1)) if m else None


def _checkpoints(root: Path) -> list[Path]:
    """Every directory named like a checkpoint (complete or not), newest first."""
    if not root.is_dir():
        return []
    found = [(key, p) for p in root.iterdir() if (key := _parse(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found, reverse=True)]


def _fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable (the directory entry itself)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file, fsync it, rename it over ``path``: old or new, never half."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def hash_files(directory: Path, rank: int) -> dict[str, dict[str, Any]]:
    """Size and sha256 of the files this rank wrote (DCP names them ``__<rank>_<i>.distcp``);
    rank 0 also takes every file no rank's prefix claims (DCP's ``.metadata``)."""
    names = sorted(p.name for p in directory.iterdir() if p.is_file())
    mine = [n for n in names if n.startswith(f"__{rank}_")]
    if rank == 0:
        mine += [n for n in names if not re.match(r"^__\d+_", n)]
    return {
        n: {"bytes": (directory / n).stat().st_size, "sha256": _sha256(directory / n)} for n in mine
    }


def prepare(root: Path, step: int) -> str:
    """Rank 0, before a save: delete what dead saves left (``.tmp-*``) and pick the name of the
    new checkpoint of ``step``, a version no directory has."""
    root.mkdir(parents=True, exist_ok=True)
    for p in root.glob(".tmp-*"):
        shutil.rmtree(p)
    versions = [key[1] for p in _checkpoints(root) if (key := _parse(p.name)) and key[0] == step]
    return dir_name(step, max(versions, default=0) + 1)


def publish(root: Path, tmp: Path, name: str, step: int, files: dict[str, Any]) -> Path:
    """Rank 0, once every rank's files are in ``tmp``: marker, rename, ``latest``, then delete
    the superseded versions of ``step`` (see the module's docstring for why in this order)."""
    _write_atomic(tmp / MARKER, json.dumps({"step": step, "files": files}, indent=1))
    final = root / name
    os.rename(tmp, final)  # ``final`` does not exist: nothing is overwritten
    _fsync_dir(root)
    _write_atomic(root / LATEST, name)  # the commit
    for old in _checkpoints(root):
        key = _parse(old.name)
        if old != final and key is not None and key[0] == step:
            with contextlib.suppress(FileNotFoundError):
                os.remove(old / MARKER)  # incomplete from now on, whatever a crash leaves
            _fsync_dir(old)
            shutil.rmtree(old)
    return final


def _incomplete(directory: Path) -> str | None:
    """Why ``directory`` is not a complete checkpoint (None when its marker is there)."""
    if not directory.is_dir():
        return "is missing"
    marker = directory / MARKER
    if not marker.exists():
        return f"has no {MARKER} (its save did not finish)"
    try:
        json.loads(marker.read_text())["files"]
    except (ValueError, KeyError, TypeError) as e:
        return f"has an unreadable {MARKER} ({type(e).__name__}: {e})"
    return None


def resolve(root: Path) -> tuple[Path | None, list[str]]:
    """The checkpoint to load under ``root`` and, when it is not the one ``latest`` names, why."""
    reasons: list[str] = []
    pointer = root / LATEST
    if pointer.is_file():
        named = root / pointer.read_text().strip()
        why = _incomplete(named)
        if why is None:
            return named, []
        reasons.append(f"{pointer} names {named}, which {why}")
    elif _checkpoints(root):
        reasons.append(f"{pointer} is missing (the first save did not finish)")
    for candidate in _checkpoints(root):
        why = _incomplete(candidate)
        if why is None:
            return candidate, [*reasons, f"loading {candidate}, the newest complete checkpoint"]
        reasons.append(f"{candidate} {why}")
    return None, reasons


def verify(directory: Path, rank: int, world_size: int) -> None:
    """Compare this rank's share of the files (every ``world_size``-th) with the sizes and
    sha256 the marker recorded; a ValueError names the first file that differs."""
    files = json.loads((directory / MARKER).read_text())["files"]
    for name in sorted(files)[rank::world_size]:
        path, want = directory / name, files[name]
        if not path.is_file():
            raise ValueError(f"{path} is missing: {directory} is corrupt (its {MARKER} lists it)")
        size = path.stat().st_size
        if size != want["bytes"] or _sha256(path) != want["sha256"]:
            raise ValueError(
                f"checksum mismatch in {path}: {size} bytes, sha256 "
                f"{_sha256(path)[:16]}..., saved as {want['bytes']} bytes, sha256 "
                f"{want['sha256'][:16]}...; the checkpoint is corrupt (delete "
                f"{directory} to load the previous complete one)"
            )


def _note(exc: BaseException, text: str) -> None:
    if hasattr(exc, "add_note"):  # Python >= 3.11
        exc.add_note(text)


def _portable(exc: BaseException | None) -> BaseException | None:
    """``exc`` if it pickles (to send to the other ranks), else a RuntimeError saying it."""
    if exc is None:
        return None
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any exception that does not travel
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def check_replicated(flat: dict[str, Any], group: Group) -> None:
    """DCP saves a name that several ranks hold once, taking it for a replicated tensor. Raise
    ``ValueError`` on every rank when two ranks of ``group`` hold different tensors under one
    name (a tensor- or pipeline-parallel model saved over all its ranks): each model-parallel
    rank's replicas save with ``group=`` their data-parallel group, in a directory of their own."""
    names = [n for n, t in flat.items() if isinstance(t, torch.Tensor)]
    prints = fingerprint([flat[n] for n in names]).tolist()  # zero.sync's, as for the weights
    mine = {n: (tuple(flat[n].shape), *row) for n, row in zip(names, prints)}
    everyone: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(everyone, mine, group=group)
    for name in sorted(set().union(*everyone)):
        held = [(r, f[name]) for r, f in enumerate(everyone) if name in f]
        differ = [r for r, f in held if f != held[0][1]]
        if differ:
            raise ValueError(
                f"{name!r} differs between ranks {held[0][0]} and {differ[0]} of the saving "
                "group, and a checkpoint writes each name once: save a model- (tensor- or "
                "pipeline-) parallel model with group= its data-parallel group, into a "
                "directory of its own per model-parallel rank"
            )


def agreed(fn: Callable[[], Any] | None, group: Group) -> list[Any]:
    """Run ``fn`` on this rank (None: nothing to run here) and gather every rank's result. If
    any rank failed, every rank raises the lowest failing rank's exception (its own, traceback
    and all, on that rank): no rank is left waiting in a collective the failed one skipped."""
    value, error = None, None
    try:
        value = fn() if fn is not None else None
    except Exception as e:  # noqa: BLE001 - every rank must hear of it
        error = e
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, (value, _portable(error)), group=group)
    failed = [r for r, (_, e) in enumerate(gathered) if e is not None]
    if failed:
        first = failed[0]
        if error is not None and dist.get_rank(group) == first:
            raise error
        exc = gathered[first][1]
        _note(exc, f"(raised on rank {first}; failing ranks: {failed})")
        raise exc
    return [v for v, _ in gathered]


@contextlib.contextmanager
def first_cause(what: str) -> Iterator[None]:
    """Re-raise DCP's ``CheckpointException`` (headline ``ranks:dict_keys([0, 1])``) as the
    lowest failing rank's own exception -- its type and message first -- chained to it."""
    try:
        yield
    except CheckpointException as e:
        rank = min(e.failures)
        cause = e.failures[rank][0]
        try:
            exc = copy.copy(cause)
            exc.__traceback__ = None
        except Exception:  # noqa: BLE001 - an exception that does not copy
            exc = RuntimeError(f"{type(cause).__name__}: {cause}")
        _note(
            exc,
            f"(torch.distributed.checkpoint.{what} failed on ranks {sorted(e.failures)}; "
            f"this is rank {rank}'s error)",
        )
        raise exc from e
