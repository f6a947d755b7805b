"""Measured memory accounting: a dispatch mode that follows every live tensor storage.

Every PyTorch operator call passes through ``__torch_dispatch__`` of the active
:class:`~torch.utils._python_dispatch.TorchDispatchMode`, below autograd, after the operator has
decided its outputs. :class:`MemoryTracker` looks at each output's *storage* -- the block of memory
a tensor and all its views share -- and counts its bytes once, under a category, until the storage
dies. It learns of the death from a :func:`weakref.finalize` on the storage's Python object, which
PyTorch keeps alive exactly as long as the storage itself. The same idea is behind PyTorch's own
(private) ``torch.distributed._tools.mem_tracker.MemTracker``, which the tests compare against.

Categories, decided by these rules in order:

1. Identity. The model's parameters are ``params``, its buffers ``other``; a parameter's ``.grad``
   is ``grads`` (a post-accumulate-grad hook on every parameter re-files it the moment autograd
   stores it); every tensor in ``optimizer.state`` is ``optimizer`` (a post-step hook re-files
   them). Tensors that already exist on entry are scanned and counted.
2. When it was made. A storage first seen as the output of an operator is ``optimizer`` if it was
   made inside ``optimizer.step()`` (states and the step's temporaries), ``activations`` if it was
   made while autograd was recording (``torch.is_grad_enabled()``: the forward pass, the loss, and
   activation recomputation inside backward), and ``other`` otherwise (backward temporaries such
   as gradients of activations, ``no_grad`` code).
3. A storage first seen as an operator's *input* existed before the tracker (a batch, say): ``other``.
4. Inside :func:`~minitorch_dist.scopes.backend_scope` (the collectives of
   :mod:`minitorch_dist.comm` run in one) no new storage is adopted: gloo copies a
   reduce-scatter's input into a buffer of its own, which its worker thread frees a moment
   earlier or later from run to run. It is gloo's memory, not the
   training algorithm's (NCCL needs no such copy), and counting it made peaks flicker.

A storage's bytes are re-read each time it is seen, and after ``UntypedStorage.resize_`` (which
ZeRO-3 and FSDP use to free gathered parameters and which calls no operator).

The *phase* (``tracker.mark("forward")`` ...) only labels the timeline; it does not decide
categories. On a GPU, ``torch.cuda.max_memory_allocated`` is recorded too, for comparison: the
tracker counts tensor bytes, the caching allocator rounds each block up to 512 bytes.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

# Entering any TorchDispatchMode imports torch._dynamo (~2 s). Import it here, once, so that
# emulated ranks forked after this module loads inherit it instead of each paying again.
import torch._dynamo  # noqa: F401 (see the comment above)
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from minitorch_dist.checks import check_choice
from minitorch_dist.scopes import in_backend_scope

CATEGORIES = ("params", "grads", "optimizer", "activations", "other")
PHASES = ("idle", "forward", "backward", "optimizer")


def _tensors(tree: Any) -> list[torch.Tensor]:
    """The strided tensors (those that own a storage) in a nest of lists, tuples and dicts."""
    return [
        t for t in tree_leaves(tree) if isinstance(t, torch.Tensor) and t.layout == torch.strided
    ]


class MemoryTracker(TorchDispatchMode):
    """Live tensor bytes by category; use as ``with MemoryTracker(model, optimizer) as tracker:``.

    After (or during) the block: :meth:`current` (bytes by category now), :meth:`peak` (the
    breakdown at the moment the total peaked -- not per-category maxima), :attr:`peak_total`,
    :attr:`timeline` (one ``(op_index, phase, {category: bytes})`` sample per operator and per
    :meth:`mark`), and :attr:`cuda` (empty without a GPU): ``allocated_at_enter`` and
    ``tracked_at_enter`` (allocator and tracker totals on entry), ``max_allocated`` and
    ``allocated`` (on exit). Compare growths: ``peak_total - tracked_at_enter`` with
    ``max_allocated - allocated_at_enter``, after a warm-up step (cuBLAS allocates its workspace
    on the first matrix product, through the same allocator).
    """

    def __init__(self, model: torch.nn.Module | None = None, optimizer: Any = None) -> None:
        super().__init__()
        self.phase = "idle"
        self.peak_total = 0
        self.timeline: list[tuple[int, str, dict[str, int]]] = []
        self.cuda: dict[str, int] = {}
        self._live: dict[int, list] = {}  # id(storage) -> [category, nbytes], while it lives
        self._bytes = dict.fromkeys(CATEGORIES, 0)
        self._total = 0
        self._peak = dict(self._bytes)
        self._ops = 0
        self._in_step = False
        self._handles: list[Any] = []
        self._hooked: set[int] = set()
        self._watch_on_enter = (model, optimizer)

    # -- scaffolding: identities, hooks, results ------------------------------------------
    def watch(self, model: torch.nn.Module | None = None, optimizer: Any = None) -> None:
        """Count ``model``'s parameters, buffers and grads and ``optimizer``'s states as they are
        now, and hook them so that new grads and states are filed as such."""
        if model is not None:
            for p in model.parameters():
                self.track(p, "params")
                if p.grad is not None:
                    self.track(p.grad, "grads")
                if p.requires_grad and id(p) not in self._hooked:
                    self._hooked.add(id(p))
                    self._handles.append(p.register_post_accumulate_grad_hook(self._on_grad))
            for b in model.buffers():
                self.track(b, "other")
        if optimizer is not None:
            self._on_step_end(optimizer)

    def _on_grad(self, param: torch.Tensor) -> None:
        self.track(param.grad, "grads")

    def _on_step_begin(self, optimizer: Any, *args: Any) -> None:
        self._in_step = True

    def _on_step_end(self, optimizer: Any, *args: Any) -> None:
        self._in_step = False
        for state in optimizer.state.values():
            for t in _tensors(state):
                self.track(t, "optimizer")

    def mark(self, phase: str) -> None:
        """Label what follows (``"forward"``, ``"backward"``, ``"optimizer"``, ``"idle"``)."""
        self.phase = check_choice("phase", phase, PHASES)
        self.timeline.append((self._ops, phase, dict(self._bytes)))

    def current(self) -> dict[str, int]:
        """Bytes of the storages alive now, by category."""
        return dict(self._bytes)

    def peak(self) -> dict[str, int]:
        """The breakdown by category at the moment the total was highest."""
        return dict(self._peak)

    def __enter__(self) -> MemoryTracker:
        try:
            self._handles += [
                register_optimizer_step_pre_hook(self._on_step_begin),
                register_optimizer_step_post_hook(self._on_step_end),
            ]
            self.watch(*self._watch_on_enter)
        except BaseException:
            self._remove_hooks()  # no global hook may outlive a failed entry
            raise
        self._patch_resize()
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
            self.cuda["allocated_at_enter"] = torch.cuda.memory_allocated()
            self.cuda["tracked_at_enter"] = self._total  # compare growth with growth
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self._remove_hooks()
        torch.UntypedStorage.resize_ = self._original_resize
        if torch.cuda.is_available():
            self.cuda["max_allocated"] = torch.cuda.max_memory_allocated()
            self.cuda["allocated"] = torch.cuda.memory_allocated()

    def _patch_resize(self) -> None:
        """``storage.resize_(0)`` frees memory without any operator call (ZeRO-3 and FSDP free
        gathered parameters this way), so wrap it to re-measure a storage we count."""
        original = self._original_resize = torch.UntypedStorage.resize_

        def resize_(storage: torch.UntypedStorage, size: int) -> Any:
            out = original(storage, size)
            if id(storage) in self._live:
                self.track(storage, "other", refile=False)
            return out

        torch.UntypedStorage.resize_ = resize_

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles, self._hooked = [], set()

    # -- the core: storage bookkeeping -----------------------------------------------------
    def track(
        self, tensor: torch.Tensor | torch.UntypedStorage, category: str, *, refile: bool = True
    ) -> None:
        """Count ``tensor``'s storage under ``category`` until the storage dies.

        A storage already counted is re-measured (it may have been resized); ``refile=True``
        also moves it to ``category``.
        """
        check_choice("category", category, CATEGORIES)
        storage = tensor if isinstance(tensor, torch.UntypedStorage) else tensor.untyped_storage()
        # BEGIN SOLUTION lab01.3: count a storage once, under a category, until it dies
        key = id(storage)  # unique while the storage lives; the finalizer forgets it on death
        entry = self._live.get(key)
        if entry is None:
            entry = self._live[key] = [category, 0]
            weakref.finalize(storage, self._free, key).atexit = False
        elif refile and entry[0] != category:
            self._bytes[entry[0]] -= entry[1]
            self._bytes[category] += entry[1]
            entry[0] = category
        grown = storage.nbytes() - entry[1]  # new storage, or one resized in place
        if grown:
            entry[1] += grown
            self._bytes[entry[0]] += grown
            self._total += grown
            if self._total > self.peak_total:
                self.peak_total, self._peak = self._total, dict(self._bytes)
        # END SOLUTION

    def _free(self, key: int) -> None:
        """Finalizer of a storage: its bytes leave the books."""
        # BEGIN SOLUTION lab01.3: forget a storage when it dies
        category, nbytes = self._live.pop(key)
        self._bytes[category] -= nbytes
        self._total -= nbytes
        # END SOLUTION

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        made, given = _tensors(out), _tensors((args, kwargs))  # the op's outputs and inputs
        if in_backend_scope():  # rule 4: inside a collective, only storages counted
            made = [t for t in made if id(t.untyped_storage()) in self._live]
            given = [t for t in given if id(t.untyped_storage()) in self._live]
        # BEGIN SOLUTION lab01.3: file each new output storage by when it was made
        if self._in_step:
            category = "optimizer"
        elif torch.is_grad_enabled():  # autograd is recording: forward, or recompute in backward
            category = "activations"
        else:
            category = "other"
        for t in made:
            self.track(t, category, refile=False)
        for t in given:
            self.track(t, "other", refile=False)  # made before the tracker saw it
        self._ops += 1
        self.timeline.append((self._ops, self.phase, dict(self._bytes)))
        # END SOLUTION
        return out
