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
original names, its optimizer's state gathered per parameter (``zero3_state_dict``).

Nothing is lost when a rank dies while saving: DCP writes into ``path/.tmp-step_N``; only after
every rank has finished does rank 0 rename it to ``path/step_N`` and then atomically replace the
small file ``path/latest`` that names the checkpoint to load (``os.replace``, atomic on POSIX).
A save killed half-way leaves a temporary directory behind and ``latest`` naming the previous,
complete checkpoint -- the write-then-rename that torchtitan's and Megatron's checkpointers
rely on too.
"""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

__all__ = ["latest_checkpoint", "load_checkpoint", "save_checkpoint"]

LATEST = "latest"


def _rank(group: dist.ProcessGroup | None) -> tuple[int, int]:
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError("checkpoints are collectives: run under launch() (or torchrun)")
    return dist.get_rank(group), dist.get_world_size(group)


def _check(model: nn.Module, optimizer: Any, sharded: bool = False) -> None:
    """ZeRO-3 keeps different shards under the same names on every rank, which DCP would take
    for replicated tensors and write once: only the full state of ``apply_zero3`` is saved."""
    if getattr(optimizer, "stage", None) == 3 or (sharded and hasattr(model, "zero3")):
        raise ValueError("ZeRO-3 is saved as apply_zero3(model) with sharded=False only: its "
                         "shards have the same names on every rank")  # fmt: skip


def _flatten(model: nn.Module, optimizer: Any, step: int, sharded: bool, rank: int,
             world_size: int) -> dict[str, Any]:  # fmt: skip
    """One flat dict of tensors (DCP's unit) plus pickled bytes for everything else."""
    zero3 = hasattr(model, "zero3")  # apply_zero3: gather the model and its optimizer whole
    model_sd, full = model.zero3_state_dict(optimizer) if zero3 else (model.state_dict(), None)
    flat: dict[str, Any] = {f"model/{k}": v for k, v in model_sd.items()}
    if sharded:
        if not hasattr(optimizer, "local_state_dict"):
            raise ValueError("sharded=True needs an optimizer with local_state_dict() (ZeRO)")
        local = optimizer.local_state_dict()
        for i, state in local["optimizer"]["state"].items():
            for name, value in state.items():
                flat[f"optim_r{rank}/{i}/{name}"] = value
        rest = {**local, "optimizer": {**local["optimizer"], "state": {}}}
        flat[f"meta_r{rank}"] = pickle.dumps(rest)
        groups = None
    else:
        full = full or optimizer.state_dict()  # consolidated: a collective for ZeRO
        for i, state in full["state"].items():
            for name, value in state.items():
                flat[f"optim/{i}/{name}"] = value
        groups = full["param_groups"]
    meta = {"step": step, "world_size": world_size, "sharded": sharded, "param_groups": groups,
            "zero3": zero3}  # fmt: skip
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
    optimizer: Any,
    *,
    step: int,
    sharded: bool = False,
    group: dist.ProcessGroup | None = None,
) -> Path:
    """Save ``model``, ``optimizer`` and ``step`` under ``path/step_<step>`` (every rank calls
    it); ``path/latest`` names it once it is complete. Returns the checkpoint's directory."""
    rank, world_size = _rank(group)
    if not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be an int >= 0, got {step!r}")
    _check(model, optimizer, sharded)
    root = Path(path)
    name = f"step_{step:08d}"
    tmp, final = root / f".tmp-{name}", root / name
    flat = _flatten(model, optimizer, step, sharded, rank, world_size)
    if rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)  # left by a save that died
    dist.barrier(group=group)
    dcp.save(flat, checkpoint_id=tmp, process_group=group)
    dist.barrier(group=group)  # every rank's files are written
    if rank == 0:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        pointer = root / f".{LATEST}.tmp"
        with open(pointer, "w") as f:
            f.write(name)
            f.flush()
            os.fsync(f.fileno())
        os.replace(pointer, root / LATEST)  # atomic: the old or the new name, never half
    dist.barrier(group=group)
    return final


def latest_checkpoint(path: str | os.PathLike) -> Path | None:
    """The last complete checkpoint under ``path`` (None if there is none)."""
    pointer = Path(path) / LATEST
    return Path(path) / pointer.read_text().strip() if pointer.exists() else None


def load_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: Any,
    *,
    group: dist.ProcessGroup | None = None,
) -> int:
    """Load the last complete checkpoint under ``path`` into ``model`` and ``optimizer`` (every
    rank calls it; a full checkpoint on any number of ranks, a sharded one on as many as saved
    it). Returns the step it was saved at."""
    rank, world_size = _rank(group)
    _check(model, optimizer)
    ckpt = latest_checkpoint(path)
    if ckpt is None:
        raise ValueError(f"no complete checkpoint under {path}")
    meta_data = FileSystemReader(str(ckpt)).read_metadata().state_dict_metadata
    head = {"meta": b""}
    dcp.load(head, checkpoint_id=ckpt, process_group=group)  # the step, world size, layout
    meta = pickle.loads(head["meta"])
    if meta["sharded"] and meta["world_size"] != world_size:
        raise ValueError(f"{ckpt} holds optimizer shards of world_size={meta['world_size']} "
                         f"ranks, this run has world_size={world_size}: a sharded checkpoint "
                         "cannot be resharded (save it with sharded=False)")  # fmt: skip
    keys = [k for k in meta_data if k.startswith("model/") or k.startswith("optim/")]
    keys += [k for k in meta_data if k.startswith((f"optim_r{rank}/", f"meta_r{rank}"))]
    template: dict[str, Any] = {}
    for key in keys:
        md = meta_data[key]
        if isinstance(md, TensorStorageMetadata):
            template[key] = torch.empty(md.size, dtype=md.properties.dtype)
        else:
            template[key] = b""  # a pickled value: DCP puts what it reads in its place
    dcp.load(template, checkpoint_id=ckpt, process_group=group)
    model_sd = {k[len("model/") :]: v for k, v in template.items() if k.startswith("model/")}
    zero3 = meta.get("zero3", False)
    if zero3 != hasattr(model, "zero3"):
        raise ValueError(f"{ckpt} was saved {'with' if zero3 else 'without'} apply_zero3: "
                         "load it into a model built the same way")  # fmt: skip
    if zero3:
        optim = {"state": _nest(template, "optim"), "param_groups": meta["param_groups"]}
        model.load_zero3_state_dict(model_sd, optim, optimizer)
        return meta["step"]
    model.load_state_dict(model_sd)
    if meta["sharded"]:
        local = pickle.loads(template[f"meta_r{rank}"])
        local["optimizer"]["state"] = _nest(template, f"optim_r{rank}")
        optimizer.load_local_state_dict(local)
    else:
        optimizer.load_state_dict({"state": _nest(template, "optim"),
                                   "param_groups": meta["param_groups"]})  # fmt: skip
    return meta["step"]
