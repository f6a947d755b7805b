"""minitorch_dist: the package behind the book *Training LLMs when memory is the wall*.

Each subpackage is one chapter's technique, built by the reader in the lab of the same number:

    launcher       emulated ranks (N CPU processes on gloo) and torchrun for real GPUs
    checks         the argument checks every module shares (a leaf: standard library only)
    models/        LlamaConfig (presets of real checkpoints) and the tiny Llama every lab trains
    memory/        closed-form accounting (estimate) and measured accounting (track)     chapter 1
    precision/     number formats, loss scaling, mixed precision, fp8                    chapter 2
    recompute/     activation checkpointing: full and selective policies                 chapter 3
    accumulate/    gradient accumulation with token-weighted normalisation               chapter 4
    comm/          bytes per collective, a counter, the ring from send/recv              chapter 5
    data_parallel/ naive and bucketed DDP with no_sync                                   chapter 5
    zero/          ZeRO stages 1, 2, 3 and optimizer offload                             chapter 6
    viz/           figures and the memory predictor widget

Top-level names are imported lazily, so ``python -m minitorch_dist.make`` runs before torch is
installed and ``import minitorch_dist`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "launch": "minitorch_dist.launcher",
    "torchrun": "minitorch_dist.launcher",
    "LaunchError": "minitorch_dist.launcher",
    "RankError": "minitorch_dist.launcher",
    "RankTimeoutError": "minitorch_dist.launcher",
    "LlamaConfig": "minitorch_dist.models",
    "model_state_bytes": "minitorch_dist.memory",
    "activation_bytes": "minitorch_dist.memory",
    "collective_bytes": "minitorch_dist.comm",
    "rank0_print": "minitorch_dist.printing",
    "seed_all": "minitorch_dist.printing",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # cache: the next access skips __getattr__
        return value
    raise AttributeError(f"module 'minitorch_dist' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
