"""The GPU path of :func:`~minitorch_dist.launching.launcher.launch`: inside torchrun, and torchrun from Python."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.launching.report import LaunchError, RankTimeoutError


def under_torchrun() -> bool:
    """True inside a process started by torchrun (or any launcher that sets RANK/WORLD_SIZE)."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def _run_in_torchrun(
    fn: Callable[..., Any], world_size: int, args: tuple, timeout: float
) -> list[Any]:
    """Inside torchrun: this process is one rank. NCCL when each local rank has its own GPU."""
    env_world = int(os.environ["WORLD_SIZE"])
    if world_size != env_world:
        raise ValueError(f"world_size={world_size} but torchrun started {env_world} processes")
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", 0))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", env_world))
    use_nccl = torch.cuda.is_available() and torch.cuda.device_count() >= local_world
    if use_nccl:
        torch.cuda.set_device(local_rank)
    created = not dist.is_initialized()
    if created:
        dist.init_process_group(
            "nccl" if use_nccl else "gloo",
            timeout=timedelta(seconds=timeout),
            **({"device_id": torch.device("cuda", local_rank)} if use_nccl else {}),
        )
    value = fn(rank, world_size, *args)
    results: list[Any] = [None] * world_size
    dist.all_gather_object(results, value)
    if created:
        dist.destroy_process_group()
    return results


def torchrun(
    script: str,
    nproc: int,
    *script_args: str,
    nnodes: int = 1,
    timeout: float = 600.0,
    echo: bool = True,
) -> str:
    """Run ``torchrun --standalone --nproc_per_node=nproc script args`` and relay its output.

    The GPU path from a notebook (where fork is impossible once CUDA is initialised) and the
    exact command a user types on a cluster. Returns the combined output; a non-zero exit
    raises ``LaunchError`` carrying the output's tail.
    """
    if nproc < 1:
        raise ValueError(f"nproc must be >= 1, got {nproc}")
    if nnodes != 1:
        raise ValueError("torchrun() from Python runs one node; for several, see the README")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += [f"--nproc_per_node={nproc}", script, *script_args]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        raise RankTimeoutError(f"torchrun did not finish within {timeout:g} s", ranks=[]) from e
    out = proc.stdout + proc.stderr
    if echo:
        print(proc.stdout, end="")
    if proc.returncode != 0:
        raise LaunchError(f"torchrun exited with code {proc.returncode}:\n{out[-4000:]}")
    return out
