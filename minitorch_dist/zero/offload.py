"""Optimizer-state offload: Adam's states, a master copy of the shard, and the update on the CPU.

ZeRO-Offload (Ren et al. 2021, sections 3 and 4) observes that the optimizer states are the
biggest model state (K = 12 of the 16 bytes per parameter with mixed precision) and the update is
the cheapest computation (O(Psi), against O(Psi x tokens) for forward and backward). So it keeps
the fp32 master weights, Adam's m and v, and the Adam update in CPU memory, and leaves the
forward and backward passes, with their parameters and gradients, on the accelerator. Per step
and rank the link between the two (PCIe) carries the gradient shard down and the updated
parameter shard back up: 2 x 4 S bytes in fp32, where S is the shard's element count.

    device                                       CPU (pinned memory on a GPU machine)
    shard.grad (S,)  ---- copy down ---->        master.grad (S,)
                                                 Adam: master, m, v  (S,) each
    shard (S,)       <---- copy up -------       master (S,)

Combined with ZeRO stage k (``offload=True`` on any stage) each rank offloads only its own shard,
so the CPU memory and the CPU's work are divided by N as well. On emulated ranks the "device"
is the CPU too: the copies are real, the bytes are counted separately, and the same code runs
with CUDA shards (``pin_memory`` then defaults to True, so the copy up can be asynchronous).

In an fp32 run the master copy duplicates the device's shard; it is the copy Adam updates
while the device's parameters serve forward and backward, as in the mixed-precision recipe,
where it is the only fp32 copy. CPU bytes per rank: 4 S (master) + 8 S (m, v) = 12 S.

Lab 6, task lab06.4, asks for the constructor's body and ``step``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["CpuOffloadAdam"]


class CpuOffloadAdam:
    """``torch.optim.Adam`` over CPU master copies of device ``shards`` (ZeRO-Offload).

    ``shards`` are the device tensors this rank updates; before :meth:`step` their ``.grad``
    holds the gradient averaged over ranks. After it, they hold the updated values.
    ``masters[i]`` (fp32, CPU) is the copy of ``shards[i]`` that Adam updates; ``optimizer`` is
    that Adam. ``state`` maps each master to its Adam state plus the master itself, so that a
    memory tracker files all of them as optimizer states.
    """

    def __init__(
        self,
        shards: Sequence[torch.Tensor],
        *,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        pin_memory: bool | None = None,
    ) -> None:
        if not shards:
            raise ValueError("CpuOffloadAdam needs at least one shard")
        self.shards = list(shards)
        pin = any(s.is_cuda for s in self.shards) if pin_memory is None else pin_memory
        self.pin_memory = pin
        hyper = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        # BEGIN SOLUTION lab06.4: an fp32 master copy of each shard in CPU memory, Adam over them
        self.masters = [
            nn.Parameter(
                torch.empty(s.shape, dtype=torch.float32, device="cpu", pin_memory=pin).copy_(
                    s.detach()
                )
            )
            for s in self.shards
        ]  # (S,) each, in CPU memory
        self.optimizer = torch.optim.Adam(self.masters, **hyper)  # m, v on the CPU, made lazily
        # END SOLUTION

    @property
    def state(self) -> dict:
        return {id(m): {**self.optimizer.state.get(m, {}), "master": m} for m in self.masters}

    @torch.no_grad()
    def step(self) -> None:
        """Gradients down to the CPU, Adam on the masters there, updated shards back up."""
        # BEGIN SOLUTION lab06.4: copy grads to the CPU, step Adam on the masters, copy them back
        for master, shard in zip(self.masters, self.shards):
            master.grad = shard.grad.to("cpu", torch.float32, copy=True)  # (S,) down
        self.optimizer.step()
        for master, shard in zip(self.masters, self.shards):
            shard.copy_(master, non_blocking=self.pin_memory)  # (S,) up
            master.grad = None  # the CPU keeps master, m, v between steps
        # END SOLUTION

    def zero_grad(self) -> None:
        for master in self.masters:
            master.grad = None
