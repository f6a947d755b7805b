"""Mixed-precision training (lab02.3): 16-bit model, fp32 master weights and optimizer states.

The recipe of Micikevicius et al. 2018 ("Mixed Precision Training", section 3) has three parts:

1. **An fp32 master copy of the weights** (section 3.1). The model's forward and backward run
   on 16-bit weights, but the update is applied to an fp32 copy, then rounded back. An update
   smaller than half the 16-bit spacing of a weight (lr * g < 2^-11 |w| in fp16) would vanish
   if added in 16 bits; in fp32 it accumulates over steps until it shows.
2. **Loss scaling** (section 3.2): :class:`~minitorch_dist.precision.DynamicLossScaler`. The
   gradients are unscaled *after* their conversion to fp32, where 1/S cannot flush them to zero.
3. **fp32 accumulation** (section 3.3): long sums (matmul dot products, reductions, the loss)
   accumulate in fp32. The kernels do that for us; the optional fp32 gradient buffer
   (``fp32_grads=True``) does it for gradients summed over micro-batches too.

Memory (ZeRO, Rajbhandari et al. 2020, section 3.1): 16-bit params 2 + grads 2 bytes per
parameter, and in the optimizer fp32 master 4 + Adam m 4 + v 4: 16 Psi bytes in all, 20 Psi with
the fp32 gradient buffer -- ``model_state_bytes(..., recipe="mixed" | "mixed_fp32_grads")``.
The master copies live in this optimizer's ``state`` (``state[p]["master"]``) and Adam's in the
inner optimizer's, so :class:`~minitorch_dist.memory.MemoryTracker` files both as optimizer
states; the fp32 gradient buffers are each master's ``.grad``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from minitorch_dist.precision.loss_scaling import DynamicLossScaler


class MixedPrecisionOptimizer(torch.optim.Optimizer):
    """Train 16-bit parameters with an fp32 master copy and an fp32 inner optimizer.

    ``params`` are the model's (16-bit) parameters, one flat iterable. ``optimizer_cls(masters,
    **optimizer_kwargs)`` builds the inner optimizer (default Adam) on fp32 copies of them. Each
    :meth:`step` (Micikevicius et al. 2018, Figure 1):

        fp32 gradient of each master  <- the 16-bit gradient, converted
        unscale by 1/S, check for inf/NaN: if found, skip the step (and back off S)
        clip the global gradient norm to ``max_grad_norm`` (if given)
        inner optimizer step on the fp32 masters
        copy each master back into its 16-bit parameter (rounding to nearest)

    ``loss_scaler``: a :class:`DynamicLossScaler`, or None (bf16 usually needs none).
    ``fp32_grads=True`` keeps an fp32 gradient buffer per parameter (each master's ``.grad``): a
    hook moves every new 16-bit gradient into it right after backward, so gradients summed over
    micro-batches accumulate in fp32; the 16-bit ``.grad`` is left holding zeros. Learning-rate
    schedules act on the inner optimizer (``self.optimizer``). Not covered: param groups,
    closures, checkpointing (``state_dict``).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        optimizer_cls: type[torch.optim.Optimizer] = torch.optim.Adam,
        *,
        loss_scaler: DynamicLossScaler | None = None,
        max_grad_norm: float | None = None,
        fp32_grads: bool = False,
        **optimizer_kwargs: Any,
    ) -> None:
        params = list(params)
        if not params:
            raise ValueError("params must hold at least one parameter")
        for p in params:
            if not isinstance(p, torch.Tensor) or not p.is_floating_point() or not p.requires_grad:
                raise ValueError("params must be floating-point tensors with requires_grad=True")
        if max_grad_norm is not None and not max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be None or > 0, got {max_grad_norm!r}")
        if loss_scaler is not None and not isinstance(loss_scaler, DynamicLossScaler):
            raise ValueError(
                f"loss_scaler must be a DynamicLossScaler or None, got {loss_scaler!r}"
            )
        super().__init__(params, defaults={})
        with torch.no_grad():  # the masters are plain fp32 leaves, made outside any autograd graph
            masters = [p.detach().to(torch.float32, copy=True) for p in params]
        for p, master in zip(params, masters):
            self.state[p]["master"] = master
            if fp32_grads:
                master.grad = torch.zeros_like(master)
                p.register_post_accumulate_grad_hook(self._move_grad_to_fp32)
        self.optimizer = optimizer_cls(masters, **optimizer_kwargs)
        self.loss_scaler = loss_scaler
        self.max_grad_norm = max_grad_norm
        self.fp32_grads = fp32_grads

    @property
    def pairs(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``(16-bit parameter, its fp32 master)`` for every parameter, in order."""
        return [(p, self.state[p]["master"]) for p in self.param_groups[0]["params"]]

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss * S`` with a loss scaler, else ``loss``: call ``.backward()`` on this."""
        return loss if self.loss_scaler is None else self.loss_scaler.scale(loss)

    @torch.no_grad()
    def _move_grad_to_fp32(self, p: torch.Tensor) -> None:
        """After backward wrote ``p.grad``: add it to the fp32 buffer, zero the 16-bit one."""
        self.state[p]["master"].grad.add_(p.grad)  # fp32 += fp16: the sum is kept in fp32
        p.grad.zero_()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the 16-bit gradients (and zero the fp32 buffers with ``fp32_grads``)."""
        super().zero_grad(set_to_none)
        if self.fp32_grads:
            for _, master in self.pairs:
                master.grad.zero_()

    @torch.no_grad()
    def step(self) -> bool:  # type: ignore[override]
        """One mixed-precision update (class docstring); returns False if it was skipped."""
        pairs = self.pairs
        masters = [master for _, master in pairs]
        # BEGIN SOLUTION lab02.3: fp32 grads, unscale and skip on inf/NaN, clip, update, copy back
        if not self.fp32_grads:  # the fp32 gradient exists only for the duration of the step
            for p, master in pairs:
                master.grad = None if p.grad is None else p.grad.to(torch.float32, copy=True)
        stepped = True
        if self.loss_scaler is not None:
            found_inf = self.loss_scaler.unscale_(m.grad for m in masters)  # 1/S, in fp32
            self.loss_scaler.update(found_inf)
            stepped = not found_inf
        if stepped:
            if self.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(masters, self.max_grad_norm)
            self.optimizer.step()
            for p, master in pairs:
                p.copy_(master)  # round to the 16-bit format, nearest-even
        # END SOLUTION
        if not self.fp32_grads:
            for master in masters:
                master.grad = None
        return stepped


def norms_in_fp32(model: torch.nn.Module) -> torch.nn.Module:
    """Run every RMSNorm of ``model`` in fp32 (and cast its output back to the weight's dtype).

    Micikevicius et al. 2018, section 3.3: reductions belong in fp32. In an fp16 Llama the norm's
    backward computes rstd^3 = mean(x^2)^(-3/2), which overflows fp16 as soon as the activations
    are small (|x| ~ 0.02 gives rstd^3 ~ 1.25e5 > 65504); autocast on a GPU runs ``pow`` and
    ``rsqrt`` in fp32 for the same reason (PyTorch's autocast op reference). Hooks, so parameter
    names do not change. Returns ``model``.
    """
    from minitorch_dist.models import RMSNorm

    def to_fp32(module: torch.nn.Module, args: tuple) -> tuple:
        return (args[0].float(), *args[1:])

    def back(module: torch.nn.Module, args: tuple, out: torch.Tensor) -> torch.Tensor:
        return out.to(module.weight.dtype)

    for module in model.modules():
        if isinstance(module, RMSNorm):
            module.register_forward_pre_hook(to_fp32)
            module.register_forward_hook(back)
    return model
