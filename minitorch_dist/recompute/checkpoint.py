"""Activation checkpointing built from scratch as a ``torch.autograd.Function`` (lab03.1).

Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost", section 4: instead of keeping
every intermediate result of a segment of the network for the backward pass, keep only the
segment's *input*, run its forward without recording anything, and in the backward pass run the
forward again -- this time recording -- to get the intermediates back just before they are
needed. Memory drops from "everything inside the segment" to "its input"; time grows by one more
forward pass of the segment. Korthikanti et al. 2022 (section 5) call this *full* recomputation
when the segment is a whole transformer layer, and *selective* when it is only the attention
core.

:class:`CheckpointFunction` is the whole mechanism, in the reentrant style of the original
``torch.utils.checkpoint``:

- ``forward`` saves the inputs (references to tensors that exist anyway: no copy) and runs the
  segment under ``torch.no_grad()``, so autograd keeps nothing of its inside;
- ``backward`` detaches the saved inputs, runs the segment again under ``torch.enable_grad()``,
  and backpropagates the incoming gradients through that fresh graph with
  ``torch.autograd.backward``: parameter gradients accumulate into ``.grad`` as usual, input
  gradients are returned to the outer graph.

Two details make the recomputation *the same* computation:

- **Randomness.** Dropout draws a new mask on every call. ``forward`` records the RNG state (CPU,
  and every CUDA device the inputs live on) and ``backward`` replays it inside
  ``torch.random.fork_rng``, so the recomputed masks equal the original ones and the caller's RNG
  stream continues as if nothing had been recomputed.
- **Autocast.** ``backward`` runs outside the caller's ``torch.autocast`` block, so the autocast
  state seen by ``forward`` is recorded and re-entered (else the recomputation would run in fp32
  and disagree with the forward in dtype).

Limits, shared with ``torch.utils.checkpoint(use_reentrant=True)``: at least one input must
require grad (otherwise autograd never calls ``backward``), and the gradient is delivered by
``.backward()`` (``torch.autograd.grad`` would not see the parameters' gradients, which the
inner ``torch.autograd.backward`` accumulates into ``.grad``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

__all__ = ["CheckpointFunction", "checkpoint"]


def _cuda_devices(tensors: Iterable[torch.Tensor]) -> list[int]:
    """The CUDA device indices the tensors live on: their RNGs are the ones dropout draws from."""
    return sorted({t.device.index for t in tensors if t.device.type == "cuda"})


def _autocast_state() -> dict[str, tuple[bool, torch.dtype]]:
    """Whether autocast is on, and in which dtype, for the CPU and (when present) CUDA."""
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4: one API for every device type
        return {d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in devices}
    legacy = {  # older names, one per device type
        "cpu": (torch.is_autocast_cpu_enabled, torch.get_autocast_cpu_dtype),
        "cuda": (torch.is_autocast_enabled, torch.get_autocast_gpu_dtype),
    }
    return {d: (legacy[d][0](), legacy[d][1]()) for d in devices}


@contextlib.contextmanager
def _autocast(state: dict[str, tuple[bool, torch.dtype]]) -> Iterator[None]:
    """Re-enter the autocast state that :func:`_autocast_state` recorded."""
    with contextlib.ExitStack() as stack:
        for device, (enabled, dtype) in state.items():
            stack.enter_context(torch.autocast(device, dtype=dtype, enabled=enabled))
        yield


class CheckpointFunction(torch.autograd.Function):
    """y = f(*args), keeping only ``args`` for backward and recomputing f inside it.

    Called as ``CheckpointFunction.apply(f, preserve_rng_state, *args)``; use :func:`checkpoint`.
    ``args`` may mix tensors and other values; ``f`` returns a tensor or a tuple of tensors.
    The gradient with respect to each tensor of ``args`` is returned (None for the others and for
    tensors that do not require grad); gradients of parameters used inside ``f`` accumulate into
    their ``.grad`` during the recomputation.
    """

    @staticmethod
    def forward(ctx: Any, run_function: Callable[..., Any], preserve_rng_state: bool, *args: Any):  # noqa: ANN205
        """Keep ``args`` (tensors via ``ctx.save_for_backward``, the rest on ``ctx``), the RNG
        state when ``preserve_rng_state`` (CPU, and the CUDA devices of the tensors) and the
        autocast state (``_autocast_state()``); return ``run_function(*args)`` computed under
        ``torch.no_grad()``, so that nothing inside it is stored."""
        # BEGIN SOLUTION lab03.1: save the inputs and RNG state, run the forward without recording
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        ctx.autocast = _autocast_state()
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if preserve_rng_state:  # dropout inside f must draw the same masks when recomputed
            ctx.devices = _cuda_devices(tensors)
            ctx.cpu_rng = torch.get_rng_state()
            ctx.cuda_rng = [torch.cuda.get_rng_state(d) for d in ctx.devices]
        # tensors go through save_for_backward (autograd checks they are not modified in place);
        # the rest are kept as they are, with their positions
        ctx.is_tensor = [isinstance(a, torch.Tensor) for a in args]
        ctx.others = [None if is_t else a for a, is_t in zip(args, ctx.is_tensor)]
        ctx.save_for_backward(*tensors)
        with torch.no_grad():  # record nothing: the inside of f is not kept for backward
            return run_function(*args)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor):  # noqa: ANN205
        """Rerun ``run_function`` on detached copies of the saved inputs (same ``requires_grad``)
        under ``torch.enable_grad()``, with the saved RNG state restored inside
        ``torch.random.fork_rng`` and the saved autocast state (``_autocast(ctx.autocast)``);
        backpropagate ``grad_outputs`` through the outputs that require grad with
        ``torch.autograd.backward``; return ``(None, None, *input_grads)``."""
        # BEGIN SOLUTION lab03.1: recompute the forward under grad and backpropagate through it
        saved = iter(ctx.saved_tensors)
        inputs = []
        for is_tensor, other in zip(ctx.is_tensor, ctx.others):
            if is_tensor:
                t = next(saved)
                # a fresh leaf on the same storage: the recomputed graph ends here, not in the
                # outer graph (which is being traversed right now)
                inputs.append(t.detach().requires_grad_(t.requires_grad))
            else:
                inputs.append(other)
        devices = ctx.devices if ctx.preserve_rng_state else []
        # fork_rng: whatever the recomputation draws, the caller's RNG state is restored after it
        with torch.random.fork_rng(devices=devices, enabled=ctx.preserve_rng_state):
            if ctx.preserve_rng_state:
                torch.set_rng_state(ctx.cpu_rng)
                for device, state in zip(ctx.devices, ctx.cuda_rng):
                    torch.cuda.set_rng_state(state, device)
            with torch.enable_grad(), _autocast(ctx.autocast):
                outputs = ctx.run_function(*inputs)
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        pairs = [
            (o, g)
            for o, g in zip(outputs, grad_outputs)
            if isinstance(o, torch.Tensor) and o.requires_grad and g is not None
        ]
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        grads = tuple(x.grad if isinstance(x, torch.Tensor) else None for x in inputs)
        return (None, None, *grads)  # no gradient for run_function and preserve_rng_state
        # END SOLUTION


def checkpoint(function: Callable[..., Any], *args: Any, preserve_rng_state: bool = True) -> Any:
    """``function(*args)``, with its intermediate activations recomputed in backward instead of
    stored (Chen et al. 2016, section 4). Same gradients as ``function(*args)``.

    Raises ValueError when no tensor argument requires grad: autograd would then never call the
    backward, and the parameters inside ``function`` would silently get no gradient.
    """
    if not callable(function):
        raise ValueError(f"function must be callable, got {type(function).__name__}")
    if torch.is_grad_enabled() and not any(
        isinstance(a, torch.Tensor) and a.requires_grad for a in args
    ):
        raise ValueError(
            "at least one tensor argument must require grad: otherwise the checkpoint's backward "
            "never runs and the parameters inside the function get no gradient"
        )
    if not torch.is_grad_enabled():  # evaluation: nothing to save, nothing to recompute
        return function(*args)
    return CheckpointFunction.apply(function, preserve_rng_state, *args)
