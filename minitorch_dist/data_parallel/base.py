"""What the data-parallel wrappers share: the interface and the gradient hooks.

Data parallelism (Li et al. 2020, "PyTorch Distributed", §2-3): every rank holds the whole
model, runs forward and backward on its own slice of the global batch, and then averages the
gradients over the ranks, so that every rank takes the same optimizer step from the same weights.

Both wrappers of this package (``DataParallelNaive`` and ``DataParallelBucket``) are used like
``torch.nn.parallel.DistributedDataParallel``::

    model = DataParallelBucket(model, bucket_cap_mb=25)
    loss_fn(model(x), y).backward()   # returns with every .grad averaged over the ranks
    optimizer.step()

with torch's options where they make sense: ``find_unused_parameters=True`` (a parameter that
gets no gradient on a rank contributes zeros), ``bucket_cap_mb=None`` (one bucket), a second
``finish_gradient_synchronization()`` after backward is a no-op, and ``state_dict`` /
``load_state_dict`` are the wrapped module's.

This base class registers a hook on every trainable parameter that fires once its gradient has
been accumulated into ``.grad`` (``register_post_accumulate_grad_hook``). The first hook of a
backward pass queues a callback that autograd runs when the whole backward pass is done; the
callback calls ``finish_gradient_synchronization()``. A subclass decides what to do when one
gradient is ready (``_grad_ready``: nothing, for the naive wrapper) and at the end.
Under ``no_sync()`` the hooks do nothing, and gradients accumulate locally
(Li et al. 2020, §3.2.4).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn
from torch.autograd import Variable

from minitorch_dist.checks import check_bool

if TYPE_CHECKING:  # the recorder measures from outside; the wrappers only stamp its events
    from minitorch_dist.data_parallel.timeline import Timeline
from minitorch_dist.comm.groups import Group

__all__ = ["DataParallelBase", "replicas_agree", "trainable_parameters"]


def trainable_parameters(module: nn.Module) -> list[nn.Parameter]:
    """The parameters that need gradients, each once (a tied weight appears once), in order."""
    return [p for p in module.parameters() if p.requires_grad]


class DataParallelBase(nn.Module):
    """A module wrapper whose ``backward`` ends with gradients averaged over ``group``."""

    def __init__(
        self,
        module: nn.Module,
        group: Group = None,
        *,
        find_unused_parameters: bool = False,
    ) -> None:
        super().__init__()
        check_bool("find_unused_parameters", find_unused_parameters)
        if not isinstance(module, nn.Module):
            raise ValueError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError(
                "data parallelism needs an initialised process group: run the code under "
                "minitorch_dist.launch (or torchrun)"
            )
        self.module = module
        self.group = group
        self.world_size = dist.get_world_size(group)
        self.require_backward_grad_sync = True  # False inside no_sync()
        self.timeline: Timeline | None = None  # set a Timeline to record the next steps
        self.params = trainable_parameters(module)
        self._index = {id(p): i for i, p in enumerate(self.params)}
        self._names = {id(p): name for name, p in module.named_parameters()}
        self.find_unused_parameters = find_unused_parameters
        self._callback_queued = False
        self._synced = False  # this backward pass's gradients are synchronised already
        self._globally_unused: list[nn.Parameter] = []
        self._handles = [p.register_post_accumulate_grad_hook(self._hook) for p in self.params]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Skip the gradient synchronisation of the backward passes run inside the block.

        Gradient accumulation: the micro-batches before the last one accumulate into ``.grad``
        locally; the backward of the last one (outside the block) averages the sums, once. The
        backward pass must run inside the block; as with torch's DDP, put the forward there too.
        """
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def finish_gradient_synchronization(self) -> None:
        """Make every trainable ``.grad`` the average over the ranks (called after backward)."""
        raise NotImplementedError  # each wrapper implements it

    def _grad_ready(self, param: nn.Parameter) -> None:
        """Called when ``param.grad`` holds this backward's gradient; default: nothing."""

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The wrapped module's state dict (its own keys, without a ``module.`` prefix)."""
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """Load into the wrapped module (keys as :meth:`state_dict` gives them)."""
        return self.module.load_state_dict(state_dict, strict=strict, assign=assign)

    # -- given plumbing around each wrapper's synchronisation ---------------------------------
    def _locally_used(self) -> list[bool]:
        """Whether each of ``params`` got a gradient on this rank in this backward pass."""
        return [p.grad is not None for p in self.params]

    def _fill_unused(self, used: list[bool]) -> None:
        """Give each parameter this rank did not use a zero gradient (before the all-reduce)."""
        for p, u in zip(self.params, used):
            if not u:
                p.grad = torch.zeros_like(p)

    def _start_sync(self) -> bool:
        """Before a synchronisation: False if this backward pass's gradients are synchronised
        already (a second call is a no-op). Parameters without a gradient on this rank are an
        error, or with ``find_unused_parameters=True`` contribute zeros; those no rank used
        keep ``.grad = None`` afterwards, as under torch's DDP (a small all-reduce of the
        used-flags tells, after every rank has launched the same collectives)."""
        if self._synced:
            return False
        used = self._locally_used()
        if not all(used) and not self.find_unused_parameters:
            missing = [self.name_of(p) for p, u in zip(self.params, used) if not u]
            raise RuntimeError(
                f"no gradient for {missing}: every trainable parameter must take part in the "
                "loss (freeze the others with requires_grad_(False), or pass "
                "find_unused_parameters=True)"
            )
        if self.find_unused_parameters:
            self._fill_unused(used)
            flags = torch.tensor(used, dtype=torch.float32, device=self.params[0].device)
            dist.all_reduce(flags, group=self.group)  # how many ranks used each parameter
            self._globally_unused = [p for p, n in zip(self.params, flags.tolist()) if n == 0]
        return True

    def _end_sync(self) -> None:
        for p in self._globally_unused:
            p.grad = None
        self._globally_unused = []
        self._synced = True

    def name_of(self, param: nn.Parameter) -> str:
        return self._names.get(id(param), f"parameter {self._index.get(id(param), '?')}")

    def remove_hooks(self) -> None:
        """Unregister the gradient hooks (the wrapped module is left as it was)."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _record(self, kind: str, index: int = -1) -> None:
        if self.timeline is not None:
            self.timeline.record(kind, index)

    def _hook(self, param: nn.Parameter) -> None:
        if not self.require_backward_grad_sync:
            return
        self._record("grad", self._index[id(param)])
        if not self._callback_queued:  # once per backward pass: synchronise when it ends
            self._callback_queued = True
            self._synced = False
            Variable._execution_engine.queue_callback(self._after_backward)
        self._grad_ready(param)

    def _after_backward(self) -> None:
        self._callback_queued = False
        self._record("sync_start")
        self.finish_gradient_synchronization()
        self._record("sync_end")


def replicas_agree(module: nn.Module, group: Group = None) -> bool:
    """True when every rank holds the same parameters and buffers, bit for bit.

    A collective (every rank must call it): an element-wise min and max over the ranks agree
    only where all ranks agree.
    """
    tensors = [*module.parameters(), *module.buffers()]
    if not tensors:
        return True
    flat = torch.cat([t.detach().reshape(-1).double() for t in tensors])  # (total,)
    lo, hi = flat.clone(), flat.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN, group=group)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX, group=group)
    return bool(torch.equal(lo, hi))
