"""The model as the planner sees it: a Llama, or a Llama whose MLPs are mixtures of experts.

The planner needs three numbers of a model under a layout, all from :mod:`minitorch_dist.models`:
the parameters one rank holds (:meth:`LlamaConfig.num_params_per_rank` for a dense model; for a
MoE model the count of :func:`~minitorch_dist.models.moe.moe_params_per_rank` cut into pipeline
stages in proportion to their layers), split into the *dense* part, replicated over the data
parallel ranks, and the *expert* part, replicated only over ``dp / ep`` of them; and the training
FLOPs per token (:func:`minitorch_dist.memory.flops.flops_per_token`, ``6 N + 12 L s h_q``; for a MoE
model ``N`` counts the parameters a token uses, :func:`~minitorch_dist.models.moe.moe_active_params`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from minitorch_dist.memory.flops import flops_per_token
from minitorch_dist.models import PRESETS, LlamaConfig, split_layers
from minitorch_dist.models.moe_configs import (
    MOE_PRESETS,
    MoEConfig,
    moe_active_params,
    moe_param_counts,
    moe_params_per_rank,
)

__all__ = ["PlannerModel", "as_model"]


@dataclass(frozen=True)
class PlannerModel:
    """A Llama (``moe=None``) or a Llama with mixture-of-experts MLPs."""

    llama: LlamaConfig
    moe: MoEConfig | None = None

    @property
    def name(self) -> str:
        return self.llama.name

    @property
    def moe_layers(self) -> int:
        return 0 if self.moe is None else self.llama.layers - self.moe.dense_layers

    def num_params(self) -> int:
        if self.moe is None:
            return self.llama.num_params()
        return sum(moe_param_counts(self.llama, self.moe).values())

    @lru_cache(maxsize=4096)  # noqa: B019 (frozen, hashable, few instances)
    def params_per_rank(self, *, tp: int, pp: int, ep: int = 1, stage: int = 0) -> tuple[int, int]:
        """(dense, expert) parameters one rank of pipeline stage ``stage`` holds."""
        if self.moe is None:
            return self.llama.num_params_per_rank(tp=tp, pp=pp, stage=stage), 0
        cfg, moe = self.llama, self.moe
        whole = moe_params_per_rank(cfg, moe, ep=ep, tp=tp)
        experts = self.moe_layers * (moe.experts // ep) * 3 * cfg.hidden * moe.expert_ffn // tp
        ends = cfg.num_params_per_rank(tp=tp) - cfg.layers * (
            cfg.num_params_per_rank(tp=tp, pp=cfg.layers, stage=1)
        )  # embedding, final norm and head of one rank
        share = split_layers(cfg.layers, pp)[stage] / cfg.layers  # this stage's share of layers
        layers_dense = whole - experts - ends
        dense = round(layers_dense * share)
        if stage == 0:
            dense += cfg.num_params_per_rank(tp=tp, pp=cfg.layers, stage=0) - (
                cfg.num_params_per_rank(tp=tp, pp=cfg.layers, stage=1)
            )
        if stage == pp - 1:
            last = cfg.num_params_per_rank(tp=tp, pp=cfg.layers, stage=cfg.layers - 1)
            dense += last - cfg.num_params_per_rank(tp=tp, pp=cfg.layers, stage=1)
        return dense, round(experts * share)

    @lru_cache(maxsize=4096)  # noqa: B019
    def flops_per_token(self, seq_len: int, recompute: str = "none") -> int:
        """Training FLOPs per token, ``6 N + 12 L s h_q`` (``8 N + 16 L s h_q`` with full
        recomputation); ``N`` = the parameters a token multiplies by."""
        mode = "full" if recompute == "full" else "none"
        dense = flops_per_token(self.llama, seq_len=seq_len, recompute=mode)
        if self.moe is None:
            return dense
        passes = 4 if mode == "full" else 3
        active = moe_active_params(self.llama, self.moe)
        # swap the dense model's product parameters for the active ones (embedding excluded)
        dense_products = self.llama.num_params() - self.llama.param_counts()["embedding"]
        active_products = active - self.llama.param_counts()["embedding"]
        return dense + passes * 2 * (active_products - dense_products)


def as_model(model: str | LlamaConfig | PlannerModel | tuple) -> PlannerModel:
    """A preset name (dense or MoE), a :class:`LlamaConfig`, a ``(LlamaConfig, MoEConfig)`` pair."""
    if isinstance(model, PlannerModel):
        return model
    if isinstance(model, LlamaConfig):
        return PlannerModel(model)
    if isinstance(model, tuple):
        return PlannerModel(*model)
    if model in PRESETS:
        return PlannerModel(PRESETS[model])
    if model in MOE_PRESETS:
        return PlannerModel(*MOE_PRESETS[model])
    raise ValueError(f"unknown model {model!r}; valid names: {', '.join([*PRESETS, *MOE_PRESETS])}")
