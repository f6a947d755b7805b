"""Mixture-of-experts shapes and their exact parameter counts: :class:`MoEConfig`, presets of real
MoE checkpoints, and the counts in total, per token (active) and per rank under expert parallelism.

A MoE model here is a :class:`LlamaConfig` (embedding, attention, norms, head, and the dense MLP
of any layer that stays dense) plus a :class:`MoEConfig` that replaces the MLP of the other layers
by ``experts`` SwiGLU experts of width ``expert_ffn``, a router (one linear map h -> E, no bias)
and ``shared_experts`` always-on experts. Parameters grow with E; the compute per token grows with
k only (Shazeer et al. 2017, "Outrageously Large Neural Networks", section 2).

Presets (numbers from each checkpoint's Hugging Face ``config.json``):

- ``mixtral-8x7b`` (Jiang et al. 2024, "Mixtral of Experts"): Mistral-7B's attention (GQA 32:8),
  8 experts of width 14336 in every one of the 32 layers, top-2. :func:`moe_num_params` gives the
  checkpoint's 46,702,792,704 exactly, :func:`moe_active_params` 12,879,925,248 (the paper's
  "13B active", embedding and head included).
- ``deepseek-v3`` (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", section 2 and 4.2): 61
  layers, the first 3 dense (MLP width 18432), the other 58 with 256 routed experts of width 2048
  plus 1 shared expert, top-8, and multi-head latent attention (MLA, :class:`MLAConfig`, counted
  exactly: low-rank q and kv projections with their RMSNorms). The count is the main model's
  671,026,419,200 parameters (the paper's "671B"; the checkpoint's 685B adds the 14B
  multi-token-prediction module, not modelled). Modelled for counting only: MLA, the router's
  per-expert bias (DeepSeek's auxiliary-loss-free balancing, E numbers per layer), the sigmoid
  scores and node-limited routing are not built by :class:`~minitorch_dist.models.moe.MoEBlock`.
- ``tiny-moe``: the lab model, the tiny Llama with 4 experts of width 88, top-2, in both layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minitorch_dist.checks import check_divisible, check_int, check_positive
from minitorch_dist.models.capacity import check_top_k, expert_capacity
from minitorch_dist.models.configs import PRESETS, LlamaConfig

__all__ = [
    "MOE_PRESETS",
    "MLAConfig",
    "MoEConfig",
    "check_top_k",
    "moe_active_params",
    "moe_num_params",
    "moe_param_counts",
    "moe_params_per_rank",
    "moe_preset",
    "moe_preset_names",
    "slots_for",
]


def slots_for(tokens: int, experts: int, capacity_factor: float, top_k: int = 1) -> int:
    """C = ceil(T k cf / E): :func:`~minitorch_dist.models.capacity.expert_capacity` (lab10.2)
    without a minimum, under the name the MoE block and the closed forms use."""
    return expert_capacity(tokens, experts, capacity_factor, top_k=top_k)


@dataclass(frozen=True)
class MLAConfig:
    """Multi-head latent attention's shape (DeepSeek-V2 paper, section 2.1; counted, not built)."""

    q_lora_rank: int  # d_c': q = W_UQ RMSNorm(W_DQ x), W_DQ: h -> q_lora_rank
    kv_lora_rank: int  # d_c: the compressed kv latent, W_DKV: h -> kv_lora_rank
    qk_nope_head_dim: int  # per-head q/k width without RoPE
    qk_rope_head_dim: int  # per-head q width with RoPE; k's RoPE part is shared by all heads
    v_head_dim: int  # per-head value width

    def params(self, hidden: int, heads: int) -> int:
        """q_a (h x d_c'), its norm, q_b (d_c' x H(nope+rope)), kv_a (h x (d_c + rope)), its
        norm, kv_b (d_c x H(nope + v)), o (H v x h)."""
        q = hidden * self.q_lora_rank + self.q_lora_rank
        q += self.q_lora_rank * heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        kv = hidden * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
        kv += self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv + heads * self.v_head_dim * hidden


@dataclass(frozen=True)
class MoEConfig:
    """The MoE part of a model. Symbols: E=experts, k=top_k, f_e=expert_ffn, cf=capacity_factor."""

    experts: int  # E: routed experts per MoE layer
    top_k: int  # k: experts each token is sent to
    expert_ffn: int  # f_e: each expert's SwiGLU width (w1, w3: h -> f_e; w2: f_e -> h)
    capacity_factor: float | None = None  # cf: slots per expert = ceil(T k cf / E); None: dropless
    shared_experts: int = 0  # always-on experts of width f_e each (one SwiGLU of shared * f_e)
    # the router's softmax runs in at least this dtype: a torch.dtype or its name (the default,
    # a name, keeps this module torch-free for the planner; models.moe reads it as torch's dtype)
    router_dtype: Any = "float32"
    normalize_weights: bool = True  # renormalise the k gate weights to sum to 1 (Mixtral: yes)
    dense_layers: int = 0  # the first layers keep their dense MLP (DeepSeek-V3: 3)
    router_bias: bool = False  # a per-expert selection bias (DeepSeek-V3; models.moe_bias)
    attention: MLAConfig | None = None  # None: the Llama's GQA attention; MLA: counted, not built

    def __post_init__(self) -> None:
        check_int("experts", self.experts)
        check_top_k(self.top_k, self.experts)
        check_int("expert_ffn", self.expert_ffn)
        if self.capacity_factor is not None:
            check_positive("capacity_factor", self.capacity_factor)
        check_int("shared_experts", self.shared_experts, minimum=0)
        check_int("dense_layers", self.dense_layers, minimum=0)


def _moe_layers(config: LlamaConfig, moe: MoEConfig) -> int:
    if moe.dense_layers > config.layers:
        raise ValueError(f"dense_layers={moe.dense_layers} exceeds layers={config.layers}")
    return config.layers - moe.dense_layers


def moe_param_counts(config: LlamaConfig, moe: MoEConfig) -> dict[str, int]:
    """Parameters by component; the values sum to :func:`moe_num_params`.

    embedding, head, norms: as the Llama (plus MLA's two latent norms inside "attention") ·
    attention: L layers of GQA (or MLA) · dense_mlp: the dense layers' 3 h f · experts:
    L_moe E 3 h f_e · shared: L_moe shared 3 h f_e · router: L_moe (E h + E when biased).
    """
    h, L = config.hidden, config.layers
    moe_layers = _moe_layers(config, moe)
    llama = config.param_counts()
    attention = llama["attention"]
    if moe.attention is not None:
        attention = L * moe.attention.params(h, config.heads)
    expert = 3 * h * moe.expert_ffn
    return {
        "embedding": llama["embedding"],
        "attention": attention,
        "dense_mlp": moe.dense_layers * 3 * h * config.ffn_hidden,
        "experts": moe_layers * moe.experts * expert,
        "shared": moe_layers * moe.shared_experts * expert,
        "router": moe_layers * (moe.experts * h + (moe.experts if moe.router_bias else 0)),
        "norms": llama["norms"],
        "head": llama["head"],
    }


def moe_num_params(config: LlamaConfig, moe: MoEConfig) -> int:
    """Exact parameter count of the MoE model (equals ``sum(p.numel())`` of the built model)."""
    return sum(moe_param_counts(config, moe).values())


def moe_active_params(config: LlamaConfig, moe: MoEConfig) -> int:
    """Parameters one token uses: everything but the E - k routed experts it is not sent to
    (embedding and head included, as Mixtral's "13B active" counts them)."""
    counts = moe_param_counts(config, moe)
    idle = counts["experts"] * (moe.experts - moe.top_k) // moe.experts
    return sum(counts.values()) - idle


def moe_params_per_rank(config: LlamaConfig, moe: MoEConfig, *, ep: int = 1, tp: int = 1) -> int:
    """Parameters one rank holds with the experts split over ``ep`` ranks (E/ep whole experts
    each) and everything else split over ``tp`` as :meth:`LlamaConfig.num_params_per_rank` does
    (experts and shared experts split by their width too, as Megatron-LM's expert tensor
    parallelism; the router replicated). ``ep=1, tp=1`` gives :func:`moe_num_params`.

    A ValueError names the violated constraint: "experts=8 is not divisible by ep=3", the
    expert width by tp, or tp > 1 with MLA (whose split is not modelled).
    """
    check_int("ep", ep)
    check_int("tp", tp)
    local = check_divisible("experts", moe.experts, "ep", ep)
    check_divisible("expert_ffn", moe.expert_ffn, "tp", tp)
    if tp > 1 and moe.attention is not None:
        raise ValueError("tp > 1 with MLA attention is not modelled: pass tp=1")
    h = config.hidden
    moe_layers = _moe_layers(config, moe)
    if tp == 1:
        counts = moe_param_counts(config, moe)
        base = sum(counts.values()) - counts["experts"]
        return base + moe_layers * local * 3 * h * moe.expert_ffn
    # the Llama's count (vocabulary padded and split, attention split) less the replaced MLPs
    base = config.num_params_per_rank(tp=tp) - moe_layers * 3 * h * config.ffn_hidden // tp
    expert = 3 * h * moe.expert_ffn // tp
    router = moe.experts * h + (moe.experts if moe.router_bias else 0)
    return base + moe_layers * (local * expert + moe.shared_experts * expert + router)


def _mixtral() -> tuple[LlamaConfig, MoEConfig]:
    llama = LlamaConfig("mixtral-8x7b", 32000, 4096, 32, 32, 8, 14336, 32768, 1e-5, 1e6)
    return llama, MoEConfig(experts=8, top_k=2, expert_ffn=14336)


def _deepseek_v3() -> tuple[LlamaConfig, MoEConfig]:
    llama = LlamaConfig("deepseek-v3", 129280, 7168, 61, 128, 128, 18432, 163840, 1e-6, 10000.0)
    mla = MLAConfig(
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
    )
    moe = MoEConfig(
        experts=256,
        top_k=8,
        expert_ffn=2048,
        shared_experts=1,
        dense_layers=3,
        router_bias=True,
        attention=mla,
    )
    return llama, moe


MOE_PRESETS: dict[str, tuple[LlamaConfig, MoEConfig]] = {
    "mixtral-8x7b": _mixtral(),
    "deepseek-v3": _deepseek_v3(),
    "tiny-moe": (PRESETS["tiny"], MoEConfig(experts=4, top_k=2, expert_ffn=88)),
}


def moe_preset_names() -> list[str]:
    """Names accepted by :func:`moe_preset`, in table order."""
    return list(MOE_PRESETS)


def moe_preset(name: str) -> tuple[LlamaConfig, MoEConfig]:
    """``(LlamaConfig, MoEConfig)`` of a published MoE checkpoint (or ``tiny-moe``) by name."""
    if name not in MOE_PRESETS:
        raise ValueError(f"unknown MoE preset {name!r}; valid names: {', '.join(MOE_PRESETS)}")
    return MOE_PRESETS[name]
