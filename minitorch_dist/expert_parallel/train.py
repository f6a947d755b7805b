"""Training the expert-parallel tiny Llama with (or without) the auxiliary load-balancing loss,
recording how unevenly the router spreads the tokens: the load imbalance max_i n_i / mean_i n_i
over the E experts (n_i: choices sent to expert i in the whole global batch, all ranks summed),
1 for perfect balance, E / k when every token picks the same k experts.

    run = train_with_aux_loss(4, steps=30, aux_alpha=0.01)    # 4 ranks, experts split
    run["imbalance"]        # per step, the mean over MoE layers of max/mean tokens per expert

The auxiliary loss of each rank is computed over that rank's tokens (per micro-batch
statistics): alpha * sum over MoE layers of :func:`load_balancing_loss` (Fedus et al. 2022,
section 2.2, alpha = 1e-2). Its gradient is averaged over the ranks with the rest.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.checks import check_int
from minitorch_dist.expert_parallel.layer import ExpertParallelMoE, apply_expert_parallel
from minitorch_dist.expert_parallel.measure import TINY_MOE, full_cross_entropy, moe_llama
from minitorch_dist.launching.launcher import launch
from minitorch_dist.models import LlamaConfig
from minitorch_dist.models.moe import MoEConfig
from minitorch_dist.models.routing import LOSS_STYLES, load_balancing_loss
from minitorch_dist.reference import make_batches, run_training

__all__ = ["AuxRun", "imbalance", "train_with_aux_loss"]


def imbalance(tokens_per_expert: torch.Tensor) -> float:
    """max_i n_i / mean_i n_i of a count per expert (E,): 1.0 is perfect balance."""
    counts = tokens_per_expert.double()
    return (counts.max() / counts.mean()).item()


@dataclass(frozen=True)
class AuxRun:
    """What :func:`train_with_aux_loss` trains (its keyword arguments)."""

    steps: int = 30  # AdamW steps
    aux_alpha: float = 0.0  # the auxiliary loss's weight (0: none; Fedus et al. use 1e-2)
    style: str = "topk"  # one of LOSS_STYLES: how load_balancing_loss counts the choices
    config: LlamaConfig | None = None  # the model (None: the tiny Llama of TINY_MOE)
    moe: MoEConfig | None = None  # its MoE blocks (None: TINY_MOE's)
    global_batch: int = 8  # sequences per step, split over the ranks
    seq_len: int = 32
    lr: float = 1e-2
    seed: int = 0  # of the model's weights and of the batches
    timeout: float = 300.0  # seconds for the launch


def _train_rank(rank: int, ep: int, run: AuxRun, batches: list) -> dict[str, Any]:
    config, moe, seed, aux_alpha = run.config, run.moe, run.seed, run.aux_alpha
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    model = apply_expert_parallel(moe_llama(config, moe, seed), dist.group.WORLD)
    layers = [m for m in model.modules() if isinstance(m, ExpertParallelMoE)]

    def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        loss = full_cross_entropy(logits, targets)
        if aux_alpha:
            aux = sum(
                load_balancing_loss(m.last_router_probs, top_k=moe.top_k, style=run.style)
                for m in layers
            )
            loss = loss + aux_alpha * aux
        return loss

    record: dict[str, list] = {"imbalance": [], "tokens_per_expert": []}

    @contextlib.contextmanager
    def count(step: int) -> Iterator[None]:
        yield
        counts = torch.stack([m.last_tokens_per_expert for m in layers])  # (layers, E)
        dist.all_reduce(counts, group=dist.group.WORLD)  # the global batch's choices
        record["tokens_per_expert"].append(counts.tolist())
        record["imbalance"].append(sum(imbalance(c) for c in counts) / len(layers))

    opt = torch.optim.AdamW(model.parameters(), lr=run.lr, weight_decay=0.1)
    trained = run_training(
        model,
        opt,
        batches,
        loss_fn=loss_fn,
        rank=rank,
        world_size=ep,
        around_step=count,
        weights=None,
    )
    record["losses"] = trained.losses
    record["last_experts"] = layers[0].last_expert_indices.tolist()  # this rank's tokens
    return record


def train_with_aux_loss(ep: int, run: AuxRun | None = None, **options: Any) -> dict[str, Any]:
    """Train ``run.steps`` AdamW steps expert-parallel over ``ep`` ranks (fp32, dropless);
    ``options`` replace fields of ``run`` (an :class:`AuxRun`). Returns ``losses`` (mean over
    ranks, per step, auxiliary term included), ``imbalance`` (per step), ``tokens_per_expert``
    (per step, per MoE layer, the global counts) and ``last_experts`` (per rank, the first MoE
    layer's (T, k) choices of the last step: a real routing)."""
    run = replace(run or AuxRun(), **options)
    run = replace(run, config=run.config or TINY_MOE[0], moe=run.moe or TINY_MOE[1])
    check_int("ep", ep)
    check_int("steps", run.steps)
    if run.style not in LOSS_STYLES:
        raise ValueError(f"style must be one of {', '.join(LOSS_STYLES)}, got {run.style!r}")
    batches = make_batches(
        run.config.vocab_size, run.global_batch, run.seq_len, run.steps, run.seed
    )
    runs = launch(_train_rank, ep, run, batches, timeout=run.timeout)
    losses = torch.tensor([r["losses"] for r in runs], dtype=torch.float64).mean(0).tolist()
    return {
        "losses": losses,
        "imbalance": runs[0]["imbalance"],
        "tokens_per_expert": runs[0]["tokens_per_expert"],
        "last_experts": [r["last_experts"] for r in runs],
        "experts": run.moe.experts,
        "ep": ep,
    }
