"""What a ZeRO rank holds and sends: the numbers chapter 6 measures, read off the object.

Each stage says which buffers it keeps between steps (``_kept_params``, ``_kept_grads``) and
which collectives one step issues (``comm_payloads``); this mixin adds them up in bytes, with
the keys of :func:`~minitorch_dist.memory.model_state_bytes`, for
:mod:`~minitorch_dist.zero.measure` and the tests. ``gathered()`` and ``full_parameters()``
give the whole parameters to whoever compares them with a reference (ZeRO-3 gathers them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

__all__ = ["Holdings", "storage_bytes"]


def storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (views of one buffer count once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage._cdata] = storage.nbytes()  # _cdata: the address of the C++ storage
    return sum(seen.values())


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


class Holdings:
    """Bytes a ZeRO rank keeps and sends (mixed into :class:`~minitorch_dist.zero.base.
    ZeroOptimizer`; a stage overrides the ``_kept_*`` lists and ``comm_payloads``)."""

    units: list
    offload: bool
    state: Any

    @contextlib.contextmanager
    def gathered(self) -> Iterator[None]:
        """Inside the block every parameter is whole on every rank (ZeRO-3 gathers them)."""
        yield

    def full_parameters(self) -> dict[str, torch.Tensor]:
        """A copy of every trainable parameter, whole, by qualified name."""
        with self.gathered(), torch.no_grad():
            return {
                name: view.clone()
                for u in self.units
                for name, view in zip(u.names, u.views(u.full))
            }

    def state_tensors(self) -> dict[str, list[torch.Tensor]]:
        """The tensors this rank keeps between steps, by category (params, grads, optimizer)."""
        return {
            "params": self._kept_params(),
            "grads": self._kept_grads(),
            "optimizer": _tensors(list(self.state.values())),
        }

    def _kept_params(self) -> list[torch.Tensor]:
        """Parameter buffers kept between steps: each unit's whole flat parameters."""
        return [u.full for u in self.units]

    def _kept_grads(self) -> list[torch.Tensor]:
        """Gradient buffers kept between steps: each unit's whole flat gradient."""
        return [u.flat_grad for u in self.units]

    def offloaded_tensors(self) -> list[torch.Tensor]:
        """The tensors kept in CPU memory by offload (none without it)."""
        return _tensors(list(self.state.values())) if self.offload else []

    def held_bytes(self) -> dict[str, int]:
        """Bytes of what this rank keeps, counted from the storages themselves, with the keys of
        :func:`~minitorch_dist.memory.model_state_bytes`: device ``params``, ``grads``,
        ``optimizer`` and their ``total``, and the ``offloaded`` bytes in CPU memory."""
        held = {k: storage_bytes(v) for k, v in self.state_tensors().items()}
        held["offloaded"] = storage_bytes(self.offloaded_tensors())
        held["optimizer"] -= held["offloaded"]
        held["total"] = held["params"] + held["grads"] + held["optimizer"]
        return held

    def comm_payloads(self) -> dict[str, int]:
        """Full-size bytes of each kind of collective one step issues (the S of the ring
        formulas), summed over units: what :class:`~minitorch_dist.comm.CommCounter` books."""
        raise NotImplementedError

    def _unit_bytes(self) -> int:
        """Bytes of every unit's padded flat buffer together: one collective's S, all units."""
        return sum(u.padded_numel * u.params[0].element_size() for u in self.units)
