"""Dynamic loss scaling (lab02.2): keep small fp16 gradients from flushing to zero.

Micikevicius et al. 2018 ("Mixed Precision Training", section 3.2): multiply the loss by a
factor S before backward, so that every gradient is S times larger and lands in fp16's range
instead of underflowing; divide the gradients by S again before the update. A fixed S (static
scaling) needs tuning per model. The dynamic scheme picks S as large as the gradients allow:

    after an overflow (any gradient inf or NaN):  skip the update,  S <- S * backoff_factor
    after growth_interval good steps in a row:   S <- S * growth_factor

It is what ``torch.amp.GradScaler`` does (defaults: S = 2^16, x2 every 2000 good steps, /2 on
overflow), and :class:`DynamicLossScaler` follows it step for step: the same scale after every
step, the same steps skipped. bf16 has fp32's exponent range, so it rarely needs any of this
(Kalamkar et al. 2019, section 3).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from minitorch_dist.checks import check_int

FP32_MAX = torch.finfo(torch.float32).max  # GradScaler keeps S in fp32: it never grows past this


class DynamicLossScaler:
    """Loss scale S, grown after ``growth_interval`` finite steps and backed off on inf/NaN.

    Use it like ``torch.amp.GradScaler``::

        scaler.scale(loss).backward()    # gradients are S times too large
        scaler.step(optimizer)           # unscale, check, step unless inf/NaN  (GradScaler.step)
        scaler.update()                  # grow or back off S                   (GradScaler.update)

    or, for gradients you manage yourself, ``found_inf = scaler.unscale_(grads)`` then
    ``scaler.update(found_inf)`` (what :class:`~minitorch_dist.precision.MixedPrecisionOptimizer`
    does with its fp32 gradients).
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ) -> None:
        if not init_scale > 0 or init_scale > FP32_MAX:
            raise ValueError(f"init_scale must be > 0 and finite in fp32, got {init_scale!r}")
        if not growth_factor > 1.0:
            raise ValueError(f"growth_factor must be > 1, got {growth_factor!r}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"backoff_factor must be in (0, 1), got {backoff_factor!r}")
        check_int("growth_interval", growth_interval)
        self._scale = float(init_scale)
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = growth_interval
        self.growth_tracker = 0  # finite steps in a row since the last change of S
        self._found_inf: bool | None = None  # what the last unscale_ found, until update()

    def get_scale(self) -> float:
        """The current loss scale S."""
        return self._scale

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss * S``: backpropagate this instead of the loss."""
        return loss * self._scale

    def unscale_(self, grads: Iterable[torch.Tensor | None]) -> bool:
        """Multiply every gradient in place by 1/S; return whether any was inf or NaN.

        Like GradScaler, multiply by the fp32 reciprocal of S (computed in fp64, rounded to fp32)
        rather than divide, and remember the answer for :meth:`update`. ``None`` entries (a
        parameter without a gradient) are skipped.
        """
        grads = [g for g in grads if g is not None]
        # BEGIN SOLUTION lab02.2: unscale the gradients in place, report inf/NaN
        inv_scale = float(torch.tensor(1.0 / self._scale, dtype=torch.float32))
        found_inf = False
        for g in grads:
            found_inf = found_inf or not bool(torch.isfinite(g).all())
            g.mul_(inv_scale)
        self._found_inf = found_inf
        return found_inf
        # END SOLUTION

    def update(self, found_inf: bool | None = None) -> None:
        """Grow or back off S after a step (``found_inf`` defaults to the last unscale_'s answer).

        inf/NaN: S <- S * backoff_factor and the count of good steps restarts. Otherwise one more
        good step; at ``growth_interval`` of them, S <- S * growth_factor (unless that overflows
        fp32) and the count restarts.
        """
        if found_inf is None:
            if self._found_inf is None:
                raise ValueError("update() needs found_inf, or an unscale_()/step() before it")
            found_inf = self._found_inf
        # BEGIN SOLUTION lab02.2: back off on inf/NaN, grow after growth_interval good steps
        if found_inf:
            self._scale *= self.backoff_factor
            self.growth_tracker = 0
        else:
            self.growth_tracker += 1
            if self.growth_tracker == self.growth_interval:
                if self._scale * self.growth_factor <= FP32_MAX:
                    self._scale *= self.growth_factor
                self.growth_tracker = 0
        # END SOLUTION
        self._found_inf = None

    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> bool:
        """Unscale the gradients of ``optimizer``'s parameters, then call ``optimizer.step()``
        unless one was inf/NaN. Returns whether the step was taken; call :meth:`update` next."""
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]]
        if self.unscale_(grads):
            return False
        optimizer.step(*args, **kwargs)
        return True

    def state_dict(self) -> dict[str, Any]:
        """The scale and the count of good steps, to checkpoint with the model."""
        return {"scale": self._scale, "growth_tracker": self.growth_tracker}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self._scale, self.growth_tracker = float(state["scale"]), int(state["growth_tracker"])
