"""Step time and bytes of naive, bucketed and torch's DDP on the same model: run on every rank.

    results = launch(compare_variants, 4, config)     # rank 0's numbers: results[0]

Each variant trains its own copy of the model on the same batch. The variants take turns,
``repeats`` times, ``steps`` steps each, behind a barrier, so a slow moment of a shared machine
hits all of them alike; the median over the turns is reported. ``CommCounter`` counts the bytes
of one more step of each. Used by the benchmark ``benchmarks/ddp_vs_torch.py`` and by lab 5.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from minitorch_dist.checks import check_choice
from minitorch_dist.comm.counting import CommCounter
from minitorch_dist.data_parallel.bucketed import DataParallelBucket
from minitorch_dist.data_parallel.naive import DataParallelNaive
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy
from minitorch_dist.reference import batch_slice, make_batches, train_step

__all__ = ["VARIANTS", "compare_variants", "wrap"]

VARIANTS = ("naive", "bucketed", "torch_ddp")


def wrap(variant: str, model: nn.Module, *, bucket_cap_mb: float | None = None) -> nn.Module:
    """``model`` wrapped by one of :data:`VARIANTS` (torch's DDP on the model's device), with the
    same buckets on both sides. ``bucket_cap_mb=None``: each wrapper's defaults, 25 MiB with a
    1 MiB first bucket. An explicit cap makes torch's DDP drop its small first bucket (it keeps
    1 MiB only while ``bucket_cap_mb`` is left at its default), so ours drops it too."""
    check_choice("variant", variant, VARIANTS)
    if variant == "naive":
        return DataParallelNaive(model)
    if variant == "bucketed":
        if bucket_cap_mb is None:
            return DataParallelBucket(model)
        return DataParallelBucket(
            model, bucket_cap_mb=bucket_cap_mb, first_bucket_cap_mb=bucket_cap_mb
        )
    on_gpu = next(model.parameters()).is_cuda  # torch_ddp
    ids = [torch.cuda.current_device()] if on_gpu else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=bucket_cap_mb)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def compare_variants(
    rank: int,
    world_size: int,
    config: LlamaConfig,
    *,
    micro_batch: int = 2,
    seq_len: int = 64,
    steps: int = 3,
    repeats: int = 5,
    bucket_cap_mb: float | None = None,
    variants: tuple[str, ...] = VARIANTS,
    device: str = "cpu",
) -> dict[str, Any]:
    """Median seconds per step of each variant (``"seconds"``) and its bytes sent in one step
    (``"bytes"``), on this rank; plus ``"grad_bytes"``, the bytes of one full gradient."""
    dev = torch.device(device)
    x, y = make_batches(config.vocab_size, micro_batch * world_size, seq_len, 1)[0]
    x, y = batch_slice(x, rank, world_size).to(dev), batch_slice(y, rank, world_size).to(dev)
    models = {}
    for v in variants:
        torch.manual_seed(0)
        model = wrap(v, Llama(config).to(dev), bucket_cap_mb=bucket_cap_mb)
        models[v] = (model, torch.optim.SGD(model.parameters(), lr=1e-2))
    params = models[variants[0]][0].parameters()
    grad_bytes = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
    for model, opt in models.values():  # warm-up (torch's DDP rebuilds its buckets here)
        for _ in range(2):
            train_step(model, opt, x, y, cross_entropy)
    seconds: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(repeats):
        for v, (model, opt) in models.items():
            _sync(dev)
            dist.barrier()
            t = time.perf_counter()
            for _ in range(steps):
                train_step(model, opt, x, y, cross_entropy)
            _sync(dev)
            seconds[v].append((time.perf_counter() - t) / steps)
    sent = {}
    for v, (model, opt) in models.items():
        with CommCounter() as cc:
            train_step(model, opt, x, y, cross_entropy)
        sent[v] = cc.bytes_sent["all_reduce"]
    return {
        "seconds": {v: statistics.median(s) for v, s in seconds.items()},
        "bytes": sent,
        "grad_bytes": grad_bytes,
    }
