"""The expert-parallel MoE layer (lab 10, task lab10.4) and the transform that applies it.

    apply_expert_parallel(model, group)          # every MoEBlock -> ExpertParallelMoE, in place

Rank r of the ep ranks keeps experts r*E/ep ... (r+1)*E/ep - 1, cut from the full block (the
same modules, so the weights are the reference's), and the router and any shared experts whole.
Each rank routes its own tokens; a forward is (Lepikhin et al. 2021, section 3.2; Rajbhandari
et al. 2022, section 5; Megatron-LM's ``MoEAlltoAllTokenDispatcher``):

    1. route: (weights, experts) (T, k); sort the T*k choices by expert, hence by owner rank
    2. exchange the counts per expert (a small all-to-all), then dispatch the rows
    3. run each local expert on the rows it received, from every rank
    4. combine: the results go back; unsort, weigh by the gate weights, sum over the k choices

``dispatch_mode="capacity"`` is the dense alternative (GShard): every rank fills an (E, C, h)
buffer, C = ``expert_capacity(T, E, cf, top_k=k)`` (choices beyond C dropped, empty slots zero),
and sends equal splits, E/ep * C rows to each rank whatever the routing.

The ep ranks are also data-parallel for everything but the experts: with ``sync_grads=True`` a
gradient hook averages the replicated parameters' gradients over the group, and divides the
experts' by ep (each owner summed the gradients of every rank's tokens, each rank's loss being
the mean over its own 1/ep of the batch).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from minitorch_dist.checks import check_choice, check_divisible
from minitorch_dist.comm.groups import Group
from minitorch_dist.expert_parallel.dispatch import combine, dispatch, exchange_counts
from minitorch_dist.models.capacity import expert_capacity
from minitorch_dist.models.moe import MoEBlock
from minitorch_dist.models.routing import apply_capacity

__all__ = ["DISPATCH_MODES", "ExpertParallelMoE", "apply_expert_parallel", "local_experts"]

DISPATCH_MODES = ("dropless", "capacity")


def local_experts(experts: int, ep: int, rank: int) -> range:
    """The experts rank ``rank`` of ``ep`` owns: a contiguous E/ep of them."""
    per = check_divisible("experts", experts, "ep", ep)
    return range(rank * per, (rank + 1) * per)


class ExpertParallelMoE(nn.Module):
    """A :class:`MoEBlock`'s forward with its experts spread over ``group``; the same parameter
    names (``router.gate.weight``, ``experts.<global index>.w1.weight``, ``shared...``)."""

    def __init__(
        self, block: MoEBlock, group: Group = None, *, dispatch_mode: str = "dropless"
    ) -> None:
        super().__init__()
        self.dispatch_mode = check_choice("dispatch_mode", dispatch_mode, DISPATCH_MODES)
        self.cfg, self.hidden, self.group = block.cfg, block.hidden, group
        self.ep, self.rank = dist.get_world_size(group), dist.get_rank(group)
        if dispatch_mode == "capacity" and block.cfg.capacity_factor is None:
            raise ValueError("dispatch_mode='capacity' needs a capacity_factor in the MoEConfig")
        if dispatch_mode == "dropless" and block.cfg.capacity_factor is not None:
            raise ValueError("dispatch_mode='dropless' drops nothing: set capacity_factor=None")
        owned = local_experts(block.cfg.experts, self.ep, self.rank)
        self.router, self.shared = block.router, block.shared
        self.experts = nn.ModuleDict({str(e): block.experts[e] for e in owned})
        # the MoEBlock's interface (the auxiliary loss's inputs): the last forward's routing;
        # what a dispatch sent is watched from outside (expert_parallel.measure.observe_dispatch)
        self.last_router_probs = self.last_expert_indices = self.last_keep = None

    @property
    def last_tokens_per_expert(self) -> torch.Tensor | None:
        """(E,) this rank's choices per expert in the last forward."""
        if self.last_expert_indices is None:
            return None
        return torch.bincount(self.last_expert_indices.reshape(-1), minlength=self.cfg.experts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.hidden)  # (T, h)
        weights, indices, probs = self.router(flat)  # (T, k), (T, k), (T, E)
        self.last_router_probs, self.last_expert_indices = probs, indices
        if self.dispatch_mode == "dropless":
            y = self._dropless(flat, indices)  # (T*k, h), in choice order
            self.last_keep = torch.ones_like(indices, dtype=torch.bool)
        else:
            y = self._capacity(flat, indices)
        out = (y.view(*indices.shape, -1) * weights.to(x.dtype)[..., None]).sum(1)  # (T, h)
        if self.shared is not None:
            out = out + self.shared(flat)
        return out.view_as(x)

    def _run_local(self, rows: torch.Tensor, local_ids: torch.Tensor) -> torch.Tensor:
        """Each local expert on the received rows labelled with its local index."""
        # rows * 0, not zeros_like: the result stays in the dispatch's autograd graph even when
        # no row came, so its backward -- a collective every rank must join -- runs everywhere
        out = rows * 0
        for i, expert in enumerate(self.experts.values()):
            where = torch.nonzero(local_ids == i, as_tuple=True)[0]
            if where.numel():
                out = out.index_add(0, where, expert(rows[where]))  # (n_i, h)
        return out

    def _dropless(self, flat: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        k, per = indices.shape[1], self.cfg.experts // self.ep
        # BEGIN SOLUTION lab10.4: sort by expert, exchange counts, dispatch, compute, combine
        choices = indices.reshape(-1)  # (T*k,) token-major
        order = torch.sort(choices, stable=True).indices  # by expert, hence by owner rank
        x_sorted = flat[order // k]  # (T*k, h)
        counts = torch.bincount(choices, minlength=self.cfg.experts)  # (E,) my choices
        received = exchange_counts(counts, self.group).view(self.ep, per)  # [source, local e]
        send = counts.view(self.ep, per).sum(1).tolist()
        recv = received.sum(1).tolist()
        rows = dispatch(x_sorted, send, recv, self.group)  # (sum(recv), h)
        local_ids = torch.repeat_interleave(torch.arange(per).repeat(self.ep), received.reshape(-1))
        y_sorted = combine(self._run_local(rows, local_ids), send, recv, self.group)  # (T*k, h)
        return y_sorted[torch.argsort(order)]  # back to choice order
        # END SOLUTION

    def _capacity(self, flat: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        k, E = indices.shape[1], self.cfg.experts
        per = E // self.ep
        c = expert_capacity(flat.shape[0], E, self.cfg.capacity_factor, top_k=k)
        keep = apply_capacity(indices, E, c)  # (T, k)
        self.last_keep = keep
        choices = indices.reshape(-1)  # (T*k,)
        # BEGIN SOLUTION lab10.2: each choice's place in its expert's queue, as apply_capacity
        onehot = F.one_hot(choices, E)
        position = (onehot.cumsum(0) * onehot).sum(-1) - 1  # place in its expert's queue
        # END SOLUTION
        kept = torch.nonzero(keep.reshape(-1), as_tuple=True)[0]
        slot = choices * c + position  # row of the (E * C, h) buffer
        buffer = flat.new_zeros(E * c, self.hidden).index_copy(0, slot[kept], flat[kept // k])
        send = [per * c] * self.ep  # equal splits: the same bytes whatever the routing
        rows = dispatch(buffer, send, send, self.group)  # (ep * per * C, h): [source, e, slot]
        local_ids = torch.arange(per).repeat_interleave(c).repeat(self.ep)
        y_buffer = combine(self._run_local(rows, local_ids), send, send, self.group)  # (E*C, h)
        y = flat.new_zeros(choices.shape[0], self.hidden)
        return y.index_copy(0, kept, y_buffer[slot[kept]])  # dropped choices: zero


def _sync_hooks(model: nn.Module, ep_modules: list[ExpertParallelMoE], group: Group) -> None:
    ep = dist.get_world_size(group)
    expert_params = {id(p) for m in ep_modules for p in m.experts.parameters()}

    def average(g: torch.Tensor) -> torch.Tensor:
        g = g.clone()
        dist.all_reduce(g, group=group)
        return g / ep

    for p in model.parameters():
        if p.requires_grad:
            p.register_hook((lambda g: g / ep) if id(p) in expert_params else average)


def apply_expert_parallel(
    model_or_block: nn.Module,
    group: Group = None,
    *,
    dispatch_mode: str = "dropless",
    sync_grads: bool = True,
) -> nn.Module:
    """Replace every :class:`MoEBlock` in ``model_or_block`` (or the block itself) by an
    :class:`ExpertParallelMoE` over ``group``, in place; returns the model (or the new layer).

    ``sync_grads``: register the gradient hooks that make the ep ranks train like one process
    on their concatenated batches (see the module docstring). A ValueError names the
    constraint: "experts=8 is not divisible by ep=3", a missing capacity factor.
    """
    if isinstance(model_or_block, MoEBlock):
        layer = ExpertParallelMoE(model_or_block, group, dispatch_mode=dispatch_mode)
        if sync_grads:
            _sync_hooks(layer, [layer], group)
        return layer
    swapped = []
    for parent in list(model_or_block.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, MoEBlock):
                layer = ExpertParallelMoE(child, group, dispatch_mode=dispatch_mode)
                setattr(parent, name, layer)
                swapped.append(layer)
    if not swapped:
        raise ValueError("no MoEBlock in the model: call models.moe.use_moe first")
    if sync_grads:
        _sync_hooks(model_or_block, swapped, group)
    return model_or_block
