"""Checkpoints that lose nothing: ``torch.distributed.checkpoint`` (DCP), written then renamed.

    save_checkpoint("ckpt", model, opt, step=100)    # every rank calls it
    step = load_checkpoint("ckpt", model, opt)       # on any number of ranks: resharded

A checkpoint is the model's state dict, the optimizer's *full* state dict (for a ZeRO optimizer
the shards consolidated over the ranks, :mod:`minitorch_dist.zero.state`; a replicated optimizer
has it already) and the step. Every rank holds the same full tensors, so DCP's planner writes
each of them once (it deduplicates replicated entries) and any number of ranks reads them
back: each ZeRO rank then keeps its own shard, which is what resharding means here. With
``sharded=True`` each rank writes only its own shard of the optimizer state (no gathering,
less traffic), and the checkpoint loads only on the same number of ranks. A model sharded by
:func:`~minitorch_dist.zero.apply_zero3` is saved whole too: its parameters gathered under their
original names, its optimizer's state gathered per parameter (``zero3_state_dict``), and so is
a model under :class:`~minitorch_dist.zero.ZeroStage3`, whose ``state_dict()`` gathers. With
``optimizer=None`` the model alone is saved or loaded; a load checks the model's keys and
shapes before it writes anything (``strict=False`` loads the keys both have). DCP writes a name
once, so a save first checks that every rank holding a name holds the same tensor under it: a
tensor- or pipeline-parallel model saves with ``group=`` its data-parallel group, one directory
per model-parallel rank (``ValueError`` otherwise, never a checkpoint of one rank's slice).

Nothing is lost when a rank, or the machine, dies at any instant of a save: DCP writes into
``path/.tmp-step_N``; only after every rank has finished does rank 0 write the marker
``complete.json`` (each file's size and sha256) into it, rename it to ``path/step_N`` (a new
name: ``step_N-v2`` when step N was saved before) and atomically replace the small file
``path/latest`` that names the checkpoint to load; an older version of the same step is deleted
only after that (:mod:`minitorch_dist.zero.checkpoint_files`). A save killed half-way leaves a
temporary directory behind and ``latest`` naming the previous, complete checkpoint -- the
write-then-rename that torchtitan's and Megatron's checkpointers rely on too. A load checks
every file's checksum first, falls back to the newest complete checkpoint (with a warning
saying why) when ``latest`` names a missing or incomplete one, and a failure inside DCP is
raised as the lowest failing rank's own exception.
"""

from __future__ import annotations

import os
import pickle
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

from minitorch_dist.comm import group_rank, group_size
from minitorch_dist.comm.groups import Group
from minitorch_dist.zero import checkpoint_files as files

__all__ = ["latest_checkpoint", "load_checkpoint", "save_checkpoint"]


def _rank(group: Group) -> tuple[int, int]:
    """This rank's place in ``group``; checkpoints are collectives, so one must exist."""
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError("checkpoints are collectives: run under launch() (or torchrun)")
    return group_rank(group), group_size(group)


def _check(model: nn.Module, optimizer: Any, sharded: bool = False) -> None:
    """apply_zero3 keeps different pieces under the same names on every rank, which DCP would
    take for replicated tensors and write once: its model is saved whole (``sharded=False``)."""
    if sharded and hasattr(model, "zero3"):
        raise ValueError(
            "ZeRO-3 is saved as apply_zero3(model) with sharded=False only: its "
            "pieces have the same names on every rank"
        )


def _flatten(
    model: nn.Module, optimizer: Any, step: int, sharded: bool, rank: int, world_size: int
) -> dict[str, Any]:
    """One flat dict of tensors (DCP's unit) plus pickled bytes for everything else."""
    zero3 = hasattr(model, "zero3")  # apply_zero3: gather the model and its optimizer whole
    model_sd, full = model.zero3_state_dict(optimizer) if zero3 else (model.state_dict(), None)
    flat: dict[str, Any] = {f"model/{k}": v for k, v in model_sd.items()}
    groups = None
    if optimizer is None:
        pass  # the model only
    elif sharded:
        if not hasattr(optimizer, "local_state_dict"):
            raise ValueError("sharded=True needs an optimizer with local_state_dict() (ZeRO)")
        local = optimizer.local_state_dict()
        for i, state in local["optimizer"]["state"].items():
            for name, value in state.items():
                flat[f"optim_r{rank}/{i}/{name}"] = value
        rest = {**local, "optimizer": {**local["optimizer"], "state": {}}}
        flat[f"meta_r{rank}"] = pickle.dumps(rest)
    else:
        full = full or optimizer.state_dict()  # consolidated: a collective for ZeRO
        for i, state in full["state"].items():
            for name, value in state.items():
                flat[f"optim/{i}/{name}"] = value
        groups = full["param_groups"]
    meta = {
        "step": step,
        "world_size": world_size,
        "sharded": sharded,
        "param_groups": groups,
        "zero3": zero3,
        "optimizer": optimizer is not None,
    }
    flat["meta"] = pickle.dumps(meta)
    return flat


def _nest(flat: dict[str, Any], prefix: str) -> dict[Any, dict[str, Any]]:
    """``prefix/<index or name>/<state>`` entries back into ``{index or name: {state: value}}``."""
    state: dict[Any, dict[str, Any]] = {}
    for key, value in flat.items():
        if key.startswith(prefix + "/"):
            i, name = key[len(prefix) + 1 :].split("/", 1)
            state.setdefault(int(i) if i.isdigit() else i, {})[name] = value
    return state


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: Any = None,
    *,
    step: int,
    sharded: bool = False,
    group: Group = None,
) -> Path:
    """Save ``model``, ``optimizer`` (None: the model only) and ``step`` under
    ``path/step_<step>`` (``-v2``, ... when that step was saved before); every rank calls it.
    ``path/latest`` names it once it is complete. Returns the checkpoint's directory."""
    rank, world_size = _rank(group)
    if not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be an int >= 0, got {step!r}")
    _check(model, optimizer, sharded)
    root = Path(path)
    flat = _flatten(model, optimizer, step, sharded, rank, world_size)
    files.check_replicated(flat, group)  # DCP writes a name once: it must mean one tensor
    name = files.agreed(lambda: files.prepare(root, step) if rank == 0 else None, group)[0]
    tmp = root / f".tmp-{name}"
    with files.first_cause("save"):
        dcp.save(flat, checkpoint_id=tmp, process_group=group)
    hashes = files.agreed(lambda: files.hash_files(tmp, rank), group)  # every rank's own files
    written = {k: v for h in hashes for k, v in h.items()}
    publish = lambda: files.publish(root, tmp, name, step, written)  # noqa: E731
    files.agreed(publish if rank == 0 else None, group)
    return root / name


def latest_checkpoint(path: str | os.PathLike) -> Path | None:
    """The checkpoint :func:`load_checkpoint` loads: the one ``path/latest`` names, or when that
    is missing or incomplete the newest complete one (with a warning saying why); None if there
    is none. Not a collective."""
    ckpt, reasons = files.resolve(Path(path))
    if reasons and ckpt is not None:
        warnings.warn("; ".join(reasons), stacklevel=2)
    return ckpt


def _expected(model: nn.Module) -> dict[str, torch.Size | None]:
    """Names and shapes of the model's state as a checkpoint holds it."""
    state = model.zero3_state_dict()[0] if hasattr(model, "zero3") else model.state_dict()
    return {k: getattr(v, "shape", None) for k, v in state.items()}


def _check_keys(ckpt: Path, model_sd: dict[str, Any], model: nn.Module, strict: bool) -> list[str]:
    """Before anything is written: names missing, unexpected (``strict``) and of another shape."""
    want = _expected(model)
    missing = sorted(set(want) - set(model_sd))
    extra = sorted(set(model_sd) - set(want))
    if missing and hasattr(model, "zero3"):
        raise ValueError(
            f"{ckpt} lacks keys {missing} of the apply_zero3 model: its flat "
            "shards are loaded whole or not at all"
        )
    if (missing or extra) and strict:
        raise ValueError(
            f"{ckpt} does not match the model (strict): missing keys {missing}, "
            f"unexpected keys {extra}; load_checkpoint(..., strict=False) loads "
            "the keys both have"
        )
    for k in sorted(set(want) & set(model_sd)):
        if want[k] is not None and tuple(getattr(model_sd[k], "shape", ())) != tuple(want[k]):
            raise ValueError(
                f"{ckpt}: {k} has shape {tuple(model_sd[k].shape)} in the "
                f"checkpoint, {tuple(want[k])} in the model"
            )
    return extra


def _find(path: str | os.PathLike, group: Group) -> Path:
    """Rank 0 resolves ``latest`` (falling back, and warning why, on every rank); every rank
    checks its share of the files' checksums."""
    root = Path(path)
    ckpt, reasons = files.agreed(
        lambda: files.resolve(root) if dist.get_rank(group) == 0 else None, group
    )[0]
    if ckpt is None:
        why = f": {'; '.join(reasons)}" if reasons else ""
        raise ValueError(f"no complete checkpoint under {root}{why}")
    if reasons:
        warnings.warn("; ".join(reasons), stacklevel=3)
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    files.agreed(lambda: files.verify(ckpt, rank, world_size), group)
    return ckpt


def load_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: Any = None,
    *,
    strict: bool = True,
    group: Group = None,
) -> int:
    """Load the last complete checkpoint under ``path`` into ``model`` and ``optimizer`` (None:
    the model only); every rank calls it. A full checkpoint loads on any number of ranks, a
    sharded one on as many as saved it. ``strict`` (default): the checkpoint's model keys must
    be the model's. Returns the step it was saved at."""
    rank, world_size = _rank(group)
    _check(model, optimizer)
    ckpt = _find(path, group)
    meta_data = FileSystemReader(str(ckpt)).read_metadata().state_dict_metadata
    head = {"meta": b""}
    with files.first_cause("load"):
        dcp.load(head, checkpoint_id=ckpt, process_group=group)  # the step, world size, layout
    meta = pickle.loads(head["meta"])
    if optimizer is not None and not meta.get("optimizer", True):
        raise ValueError(f"{ckpt} holds the model only: load it with optimizer=None")
    if optimizer is not None and meta["sharded"] and meta["world_size"] != world_size:
        raise ValueError(
            f"{ckpt} holds optimizer shards of world_size={meta['world_size']} "
            f"ranks, this run has world_size={world_size}: a sharded checkpoint "
            "cannot be resharded (save it with sharded=False)"
        )
    zero3 = meta.get("zero3", False)
    if zero3 != hasattr(model, "zero3"):
        raise ValueError(
            f"{ckpt} was saved {'with' if zero3 else 'without'} apply_zero3: "
            "load it into a model built the same way"
        )
    keys = [k for k in meta_data if k.startswith("model/")]
    if optimizer is not None:
        keys += [k for k in meta_data if k.startswith("optim/")]
        keys += [k for k in meta_data if k.startswith((f"optim_r{rank}/", f"meta_r{rank}"))]
    template: dict[str, Any] = {}
    for key in keys:
        md = meta_data[key]
        if isinstance(md, TensorStorageMetadata):
            template[key] = torch.empty(md.size, dtype=md.properties.dtype)
        else:
            template[key] = b""  # a pickled value: DCP puts what it reads in its place
    model_sd = {k[len("model/") :]: v for k, v in template.items() if k.startswith("model/")}
    for extra in _check_keys(ckpt, model_sd, model, strict):  # before the model is touched
        del template[f"model/{extra}"]  # strict=False: what the model has not, stays unread
    with files.first_cause("load"):
        dcp.load(template, checkpoint_id=ckpt, process_group=group)
    model_sd = {k[len("model/") :]: v for k, v in template.items() if k.startswith("model/")}
    if zero3:
        optim = None
        if optimizer is not None:
            optim = {"state": _nest(template, "optim"), "param_groups": meta["param_groups"]}
        model.load_zero3_state_dict(model_sd, optim, optimizer)
        return meta["step"]
    model.load_state_dict(model_sd, strict=strict)
    if optimizer is None:
        pass
    elif meta["sharded"]:
        local = pickle.loads(template[f"meta_r{rank}"])
        local["optimizer"]["state"] = _nest(template, f"optim_r{rank}")
        optimizer.load_local_state_dict(local)
    else:
        optimizer.load_state_dict(
            {"state": _nest(template, "optim"), "param_groups": meta["param_groups"]}
        )
    return meta["step"]
