"""Run one rank of a parallel program on fake tensors and a fake process group, measured.

The helpers :mod:`minitorch_dist.planner.vs_code` runs the package's own parallel code with:
:class:`MixedAdam` (the mixed-precision Adam of chapter 2, taking the param groups ZeRO hands
over), :class:`RealIntegers` (a dispatch mode that keeps real the integers fake tensors would
lose: expert routing's split sizes), :func:`uniform_routing` (a balanced router made of real
integers), and :func:`measure_step` (a warm-up step, then one step under the memory tracker).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from minitorch_dist.memory import MemoryTracker
from minitorch_dist.precision import MixedPrecisionOptimizer

__all__ = ["MixedAdam", "RealIntegers", "measure_step", "tokens", "uniform_routing"]


class MixedAdam(MixedPrecisionOptimizer):
    """Mixed-precision Adam (fp32 master, m, v) taking param groups, as ZeRO hands them over."""

    def __init__(self, groups: list, **kwargs: object) -> None:
        params = [p for g in groups for p in (g["params"] if isinstance(g, dict) else [g])]
        hyper = {
            k: v
            for g in groups
            if isinstance(g, dict)
            for k, v in g.items()
            if k in ("lr", "betas", "eps", "weight_decay")
        }
        super().__init__(params, torch.optim.Adam, **{**hyper, **kwargs})
        self.defaults = dict(self.optimizer.defaults)


class RealIntegers(TorchDispatchMode):
    """Run for real the operators whose tensor inputs are all real (the routing's integers), and
    integer factories; everything else goes on to the fake mode below."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        scalar = func is torch.ops.aten._local_scalar_dense.default
        if scalar and isinstance(args[0], FakeTensor) and args[0].is_floating_point():
            return 0.0  # a fake loss's value (the runtime logs it): there is none
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        real = bool(tensors) and not any(isinstance(t, FakeTensor) for t in tensors)
        if not tensors:
            dtype = kwargs.get("dtype")
            real = (dtype is not None and not dtype.is_floating_point) or (
                func is torch.ops.aten.arange.default
                and dtype is None
                and all(isinstance(a, int) for a in args)
            )
        if real:
            with unset_fake_temporarily():
                return func(*args, **kwargs)
        return func(*args, **kwargs)


def tokens(micro_batch: int, tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    seq = torch.zeros(micro_batch, tokens, dtype=torch.long)
    return seq, seq.clone()


@contextlib.contextmanager
def uniform_routing(model: torch.nn.Module) -> Iterator[None]:
    """Inside the block: round-robin expert choices (real integers) after each router of
    ``model``, and a count exchange that returns what a peer routing like this rank sends."""
    from minitorch_dist.expert_parallel import layer as ep_layer

    routers = [m.router for m in model.modules() if isinstance(m, ep_layer.ExpertParallelMoE)]
    experts = {id(r): r.experts for r in routers}
    original = ep_layer.exchange_counts

    def exchange(counts: torch.Tensor, group: object = None) -> torch.Tensor:
        original(counts, group)  # the collective runs (on the fake group)
        n, me = dist.get_world_size(group), dist.get_rank(group)
        return counts.view(n, -1)[me].repeat(n)  # what peers routing like this rank send here

    for router in routers:
        forward, e = router.forward, experts[id(router)]

        def routed(flat: torch.Tensor, _forward=forward, _e=e):  # noqa: ANN001, ANN202
            weights, indices, probs = _forward(flat)  # the router runs (its activations)
            with unset_fake_temporarily():
                uniform = (torch.arange(indices.numel()) % _e).view(indices.shape)
            return weights, uniform, probs

        router.forward = routed
    ep_layer.exchange_counts = exchange
    try:
        yield
    finally:
        ep_layer.exchange_counts = original
        for router in routers:
            del router.forward  # the class's forward again


def measure_step(step: Callable[[], None], model: torch.nn.Module, opt: Any, *, zero: bool) -> dict:
    """One warm-up step (the optimizer's states appear), then one measured step."""
    step()
    with MemoryTracker(model, opt) as tracker:
        if zero:
            for category, tensors in opt.state_tensors().items():
                for t in tensors:
                    tracker.track(t, category)
            for t in opt.counted():  # the clipping's mask, kept between steps
                tracker.track(t, "optimizer")
        inner = getattr(opt, "optimizer", None)  # ZeRO's MixedAdam, or MixedAdam itself
        for o in (opt, inner, getattr(inner, "optimizer", None)):
            for t in tree_leaves(list(getattr(o, "state", {}).values())):
                if isinstance(t, torch.Tensor):  # masters, Adam's m and v
                    tracker.track(t, "optimizer")
        step()
    return {"peak": tracker.peak_total, "parts": tracker.peak()}
