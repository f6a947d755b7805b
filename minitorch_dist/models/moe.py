"""A mixture-of-experts MLP for the tiny Llama: a router, E SwiGLU experts, top-k routing, optional
capacity (token dropping) -- one process, no parallel code. Chapter 10's expert parallelism cuts
it from outside (``minitorch_dist.expert_parallel``).

    model = use_moe(Llama(cfg), MoEConfig(experts=4, top_k=2, expert_ffn=88))  # in place
    block = model.layers[0].mlp            # MoEBlock: .router.gate, .experts[e].w1/w3/w2
    block.last_router_probs, block.last_expert_indices   # the auxiliary loss's inputs

The routing (Shazeer et al. 2017, section 2.1; Fedus et al. 2022, "Switch Transformers", section
2.1; Jiang et al. 2024, "Mixtral of Experts", section 2.1): logits = x W_g (in at least fp32),
p = softmax(logits) over the E experts, the k largest kept. The k weights are renormalised to sum
to 1 (``MoEConfig.normalize_weights=True``, as Mixtral and DeepSeek-V3 do: Mixtral's softmax over
the top-k logits is the same numbers); Switch (k = 1) and Qwen1.5-MoE keep the raw p instead
(``normalize_weights=False``; with k = 1 renormalising would make every weight 1 and cut the
router off from the loss's gradient). Ties go to the lower expert index (a stable sort), so the
routing is the same on every machine.

y = sum over the token's kept choices of weight * expert(x), plus the shared experts. With a
capacity factor, each expert takes at most C = ceil(T k cf / E) of the T tokens' choices, first
come first served in token order; a dropped choice contributes zero (the token still passes
through the block's residual connection, outside this module). ``capacity_factor=None`` is
dropless.

The parameter counts and presets live in :mod:`minitorch_dist.models.moe_configs` and are
re-exported here. The routing and the capacity are lab 10's own functions
(:mod:`minitorch_dist.models.routing`: ``top_k_route``, ``expert_capacity``, ``apply_capacity``,
also exported by ``minitorch_dist.expert_parallel``): the block runs the reader's routing, so
that nothing here computes a task of lab 10 a second time; the lab's tests check the functions
against hand-worked examples. :func:`slots_for` and :func:`capacity_keep` are the block's
older names for them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minitorch_dist.models.moe_bias import BiasedRouter
from minitorch_dist.models.moe_configs import (
    MOE_PRESETS,
    MLAConfig,
    MoEConfig,
    moe_active_params,
    moe_num_params,
    moe_param_counts,
    moe_params_per_rank,
    moe_preset,
    moe_preset_names,
    slots_for,
)
from minitorch_dist.models.router import Router
from minitorch_dist.models.routing import apply_capacity, expert_capacity

__all__ = [
    "MOE_PRESETS",
    "Expert",
    "MLAConfig",
    "MoEBlock",
    "MoEConfig",
    "Router",
    "capacity_keep",
    "moe_active_params",
    "moe_blocks",
    "moe_num_params",
    "moe_param_counts",
    "moe_params_per_rank",
    "moe_preset",
    "moe_preset_names",
    "slots_for",
    "use_moe",
]


def capacity_keep(expert_indices: torch.Tensor, experts: int, capacity: int) -> torch.Tensor:
    """Keep mask (T, k): :func:`~minitorch_dist.models.routing.apply_capacity` (the block's name
    for it)."""
    return apply_capacity(expert_indices, experts, capacity)


class Expert(nn.Module):
    """One SwiGLU expert: w2(silu(w1 x) * w3 x), width ``ffn`` (the Llama's MLP at another width)."""

    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(hidden, ffn, bias=False)  # gate
        self.w3 = nn.Linear(hidden, ffn, bias=False)  # up
        self.w2 = nn.Linear(ffn, hidden, bias=False)  # down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (n, h) -> (n, f_e) -> (n, h)


class MoEBlock(nn.Module):
    """Router + E experts (+ shared experts): x (b, s, h) or (T, h) -> y of the same shape.

    After each forward, ``last_router_probs`` (T, E) and ``last_expert_indices`` (T, k) hold the
    auxiliary loss's inputs (with the autograd graph: the loss's gradient reaches the router),
    and ``last_keep`` (T, k) which choices survived the capacity (all, when dropless).
    """

    def __init__(self, hidden: int, cfg: MoEConfig) -> None:
        super().__init__()
        if cfg.attention is not None:
            raise ValueError("MLA attention is counted, not built (MoEConfig.attention=None)")
        self.hidden, self.cfg = hidden, cfg
        # DeepSeek-V3's auxiliary-loss-free balancing (models.moe_bias) when cfg.router_bias
        router = BiasedRouter if cfg.router_bias else Router
        dtype = cfg.router_dtype  # a torch.dtype or its name ("float32", the default)
        dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        self.router = router(
            hidden, cfg.experts, cfg.top_k, normalize=cfg.normalize_weights, router_dtype=dtype
        )
        self.experts = nn.ModuleList(Expert(hidden, cfg.expert_ffn) for _ in range(cfg.experts))
        shared = cfg.shared_experts * cfg.expert_ffn
        self.shared = Expert(hidden, shared) if shared else None
        self.last_router_probs: torch.Tensor | None = None
        self.last_expert_indices: torch.Tensor | None = None
        self.last_keep: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.hidden)  # (T, h)
        weights, indices, probs = self.router(flat)  # (T, k), (T, k), (T, E)
        keep = torch.ones_like(indices, dtype=torch.bool)
        if self.cfg.capacity_factor is not None:
            capacity = expert_capacity(
                flat.shape[0], self.cfg.experts, self.cfg.capacity_factor, top_k=self.cfg.top_k
            )  # lab10.2
            keep = apply_capacity(indices, self.cfg.experts, capacity)
        self.last_router_probs, self.last_expert_indices, self.last_keep = probs, indices, keep
        weights = (weights * keep).to(x.dtype)  # a dropped choice weighs nothing
        out = torch.zeros_like(flat)  # (T, h)
        for e, expert in enumerate(self.experts):
            rows, slots = torch.nonzero((indices == e) & keep, as_tuple=True)
            if rows.numel():
                y = expert(flat[rows]) * weights[rows, slots, None]  # (n_e, h)
                out = out.index_add(0, rows, y)
        if self.shared is not None:
            out = out + self.shared(flat)
        return out.view_as(x)


def moe_blocks(model: nn.Module) -> list[MoEBlock]:
    """Every :class:`MoEBlock` in ``model``, in module order."""
    return [m for m in model.modules() if isinstance(m, MoEBlock)]


@torch.no_grad()
def _init(block: MoEBlock, seed: int, std: float) -> None:
    gen = torch.Generator().manual_seed(seed)
    for p in block.parameters():
        p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * std)


def use_moe(
    model: nn.Module,
    cfg: MoEConfig,
    *,
    layers: list[int] | range | None = None,
    seed: int = 0,
    init_std: float = 0.02,
) -> nn.Module:
    """Swap the MLP of ``model.layers[i]`` for a :class:`MoEBlock` for each i in ``layers``
    (default: every layer from ``cfg.dense_layers`` on), in place; returns ``model``.

    Each block's weights are N(0, init_std) drawn from its own generator seeded with
    ``seed + i``, whatever the global RNG, so every rank (and the reference) builds the same
    experts; they take the dtype and device of the MLP they replace.
    """
    if layers is None:
        layers = range(cfg.dense_layers, len(model.layers))
    for i in layers:
        ref = next(model.layers[i].mlp.parameters())
        block = MoEBlock(model.config.hidden, cfg)
        _init(block, seed + i, init_std)
        if any((p.device, p.dtype) != (ref.device, ref.dtype) for p in block.parameters()):
            block = block.to(device=ref.device, dtype=ref.dtype)  # (fake modules refuse .to())
        model.layers[i].mlp = block
    return model
