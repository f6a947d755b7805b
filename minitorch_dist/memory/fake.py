"""Measure a training step of a model too big for this machine, on fake tensors.

Under :class:`torch._subclasses.fake_tensor.FakeTensorMode` every tensor carries its shape, dtype,
strides and device but no data: operators compute only their outputs' metadata. Storages still
exist (with a size and no memory), so :class:`~minitorch_dist.memory.track.MemoryTracker` counts
the bytes a real run would hold, exactly, while the machine allocates almost nothing. One step of
Llama-2-7B at a short sequence takes seconds on two CPU cores.

Two findings the code below depends on:

- Build the model with ``torch.set_default_dtype(dtype)`` inside the fake mode; ``.to(dtype)``
  on a fake module fails. The default dtype is restored afterwards, whatever happens.
- Order of the modes: enter ``FakeTensorMode`` first and the tracker second, so the tracker is on
  top of the mode stack. It then sees each operator first and forwards it to the fake mode, whose
  outputs (fake tensors with fake storages) it files like real ones.

The recompute policies are lab 3's: ``"full"`` checkpoints every ``Block``, ``"selective"``
every ``attn.core`` (Korthikanti et al. 2022, section 5), both with the non-reentrant
:func:`torch.utils.checkpoint.checkpoint`
(:func:`~minitorch_dist.models.checkpointing.apply_torch_checkpointing`).
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from minitorch_dist.checks import check_choice, check_int
from minitorch_dist.memory.estimate import OPTIMIZERS, RECOMPUTE
from minitorch_dist.memory.measure import measure_step
from minitorch_dist.models.checkpointing import apply_torch_checkpointing


class _Autocast(nn.Module):
    """Runs the wrapped model's forward under ``torch.autocast`` (same parameters)."""

    def __init__(self, model: nn.Module, dtype: torch.dtype) -> None:
        super().__init__()
        self.model, self.dtype = model, dtype

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        with torch.autocast(tokens.device.type, dtype=self.dtype):
            return self.model(tokens)


def _make_optimizer(name: str, params: Any) -> torch.optim.Optimizer:
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3)
    return torch.optim.SGD(params, lr=1e-3, momentum=0.9)


def measure_step_fake(
    config: Any,
    *,
    seq_len: int,
    micro_batch: int,
    dtype: torch.dtype = torch.float32,
    autocast_dtype: torch.dtype | None = None,
    optimizer: str = "adam",
    recompute: str = "none",
) -> dict[str, Any]:
    """One training step of ``Llama(config)`` on fake tensors, measured by a MemoryTracker.

    The recipe measured: parameters, gradients and optimizer states all in ``dtype`` (fp32 + Adam
    = 4 + 4 + 8 = 16 bytes/param; bf16 + Adam = 2 + 2 + 4 = 8, with no fp32 master copy), and
    activations in ``dtype``, or in ``autocast_dtype`` when given (autocast also keeps a 16-bit
    copy of each weight for the step, counted under activations).

    Returns bytes: ``params``, ``grads``, ``optimizer`` (after the step), ``activations`` (saved
    at the end of the forward pass, loss included), ``activations_peak`` (largest at any moment),
    ``peak`` (the breakdown at the peak) and ``peak_total``; plus ``num_params``,
    ``bytes_per_param`` (model states after the step / num_params) and ``seconds`` (wall time).
    """
    check_int("seq_len", seq_len)
    check_int("micro_batch", micro_batch)
    if seq_len > config.max_seq_len:
        raise ValueError(f"seq_len={seq_len} exceeds max_seq_len={config.max_seq_len}")
    check_choice("optimizer", optimizer, OPTIMIZERS)
    check_choice("recompute", recompute, RECOMPUTE)
    from minitorch_dist.models import Llama, cross_entropy

    start = time.perf_counter()
    previous = torch.get_default_dtype()
    with FakeTensorMode():
        torch.set_default_dtype(dtype)
        try:
            model = Llama(config)
        finally:
            torch.set_default_dtype(previous)
        apply_torch_checkpointing(model, recompute)
        opt = _make_optimizer(optimizer, model.parameters())
        runner = model if autocast_dtype is None else _Autocast(model, autocast_dtype)

        def batch() -> tuple[torch.Tensor, torch.Tensor]:
            seq = torch.zeros(micro_batch, seq_len + 1, dtype=torch.long)  # like synthetic_batch
            return seq[:, :-1], seq[:, 1:]

        step = measure_step(runner, opt, batch, cross_entropy)
    after = step["optimizer"]
    num_params = sum(p.numel() for p in model.parameters())
    states = after["params"] + after["grads"] + after["optimizer"]
    return {
        "params": after["params"],
        "grads": after["grads"],
        "optimizer": after["optimizer"],
        "activations": step["forward"]["activations"],
        "activations_peak": max(sample[2]["activations"] for sample in step["timeline"]),
        "peak": step["peak"],
        "peak_total": step["peak_total"],
        "num_params": num_params,
        "bytes_per_param": states / num_params,
        "seconds": time.perf_counter() - start,
    }
