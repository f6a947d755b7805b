"""Vocabulary-parallel embedding, head and cross-entropy (Megatron-LM, Shoeybi et al. 2019,
section 3: "we parallelize the input embedding weight matrix along the vocabulary dimension").

The vocabulary is first padded to :func:`padded_vocab_size` (the next multiple of
``multiple * t``, Megatron's ``make_vocab_size_divisible_by``), so every rank holds the same number
of rows; rank r holds rows ``r V_p/t ... (r+1) V_p/t``. The padded rows start at zero and are
never a token, but the head still gives them a logit (zero): the cross-entropy must mask them to
-inf, or they take a share of the softmax and change the loss.

Embedding: each rank looks up the ids that fall in its rows, writes zeros for the others, and an
all-reduce (g) sums the ranks' partial tables -- under sequence parallelism a reduce-scatter.
Cross-entropy on logits split by vocabulary, without gathering them (Megatron's
``vocab_parallel_cross_entropy``), with three all-reduces of b x s numbers: the max (for a stable
softmax), the sum of exponentials, and the target's logit (only its owner has it).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from minitorch_dist.checks import check_bool, check_int
from minitorch_dist.comm.collectives import all_reduce_copy
from minitorch_dist.comm.groups import Group, group_rank, group_size
from minitorch_dist.models.configs import padded_vocab_size
from minitorch_dist.tensor_parallel.functions import reduce_from_tp, reduce_scatter_to_sp
from minitorch_dist.tensor_parallel.layers import ColumnParallelLinear

__all__ = [
    "VocabParallelCrossEntropy",
    "VocabParallelEmbedding",
    "padded_vocab_size",
    "vocab_parallel_cross_entropy",
    "vocab_parallel_head",
]


def _pad_rows(weight: torch.Tensor, rows: int) -> torch.Tensor:
    """``weight`` (V, h) with zero rows appended up to (rows, h)."""
    return torch.cat([weight, weight.new_zeros(rows - weight.shape[0], *weight.shape[1:])])


class VocabParallelEmbedding(nn.Module):
    """This rank's rows of the padded embedding table: ids (b, s) -> (b, s, h), summed over ranks
    (reduce-scattered to (b, s/t, h) under sp)."""

    def __init__(
        self, weight: torch.Tensor, group: Group, *, vocab_size: int, sp: bool = False
    ) -> None:
        super().__init__()
        self.group, self.sp, self.vocab_size = group, check_bool("sp", sp), vocab_size
        self.weight = nn.Parameter(weight)  # (V_p/t, h)
        self.start = group_rank(group) * weight.shape[0]  # my first row of the padded vocabulary

    @classmethod
    def from_embedding(
        cls, embed: nn.Embedding, group: Group, *, multiple: int = 128, sp: bool = False
    ) -> VocabParallelEmbedding:
        """Pad ``embed``'s table to :func:`padded_vocab_size` with zero rows and keep this rank's
        contiguous block of rows."""
        check_int("multiple", multiple)
        t, r = group_size(group), group_rank(group)
        vocab = embed.num_embeddings
        # BEGIN SOLUTION lab07.4: pad the table to V_p rows, keep block r of t
        padded = _pad_rows(embed.weight.detach(), padded_vocab_size(vocab, t, multiple))
        weight = padded.chunk(t)[r].clone()  # (V_p/t, h)
        # END SOLUTION
        return cls(weight, group, vocab_size=vocab, sp=sp)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION lab07.4: look up my ids, zeros for the others, sum over the ranks
        mine = (ids >= self.start) & (ids < self.start + self.weight.shape[0])  # (b, s)
        local = torch.where(mine, ids - self.start, 0)  # (b, s): a valid row everywhere
        out = F.embedding(local, self.weight) * mine.unsqueeze(-1)  # (b, s, h), 0 if not mine
        return reduce_scatter_to_sp(out, self.group) if self.sp else reduce_from_tp(out, self.group)
        # END SOLUTION

    def extra_repr(self) -> str:
        return f"vocab_size={self.vocab_size}, rows {self.start}..{self.start + len(self.weight)}"


def vocab_parallel_head(
    head: nn.Linear, group: Group, *, multiple: int = 128, sp: bool = False
) -> ColumnParallelLinear:
    """The output head as a column-parallel layer over the padded vocabulary: (b, s, h) ->
    this rank's logits (b, s, V_p/t); the padded rows are zeros (their logits must be masked)."""
    check_int("multiple", multiple)
    t = group_size(group)
    # BEGIN SOLUTION lab07.4: pad the head's rows to V_p with zeros, then cut by columns of output
    padded = nn.Linear(
        head.in_features,
        padded_vocab_size(head.out_features, t, multiple),
        bias=False,
        device=head.weight.device,
        dtype=head.weight.dtype,
    )
    with torch.no_grad():
        padded.weight.copy_(_pad_rows(head.weight.detach(), padded.out_features))
    return ColumnParallelLinear.from_linear(padded, group, sp=sp)
    # END SOLUTION


def _upcast(x: torch.Tensor) -> torch.Tensor:
    """fp32 for 16-bit logits (log-softmax over a vocabulary needs it); fp32/fp64 unchanged."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Per-token loss from vocabulary-sharded logits; gradient softmax - onehot, on my columns."""

    @staticmethod
    def forward(
        ctx: Any,
        local_logits: torch.Tensor,
        target: torch.Tensor,
        group: Group,
        vocab_size: int | None,
    ) -> torch.Tensor:
        # BEGIN SOLUTION lab07.4: max, sum of exponentials and target logit: three all-reduces
        x = _upcast(local_logits)  # (b, s, V/t)
        width = x.shape[-1]
        start = group_rank(group) * width  # my first column of the (padded) vocabulary
        if vocab_size is not None and start + width > vocab_size:  # padded columns: never a token
            column = torch.arange(start, start + width, device=x.device)
            x = x.masked_fill(column >= vocab_size, float("-inf"))
        top = all_reduce_copy(x.max(dim=-1).values, group, dist.ReduceOp.MAX)  # (b, s)
        x = x - top.unsqueeze(-1)  # (b, s, V/t), <= 0: exp cannot overflow
        mine = (target >= start) & (target < start + width)  # (b, s): do I own the target?
        local = torch.where(mine, target - start, 0)  # (b, s)
        picked = x.gather(-1, local.unsqueeze(-1)).squeeze(-1)  # (b, s)
        picked = all_reduce_copy(torch.where(mine, picked, 0.0), group)  # the owner's value
        exp = x.exp()  # (b, s, V/t)
        total = all_reduce_copy(exp.sum(dim=-1), group)  # (b, s)
        ctx.save_for_backward(exp.div_(total.unsqueeze(-1)), local, mine)  # softmax on my columns
        ctx.dtype = local_logits.dtype
        return total.log() - picked  # (b, s): -log softmax[target]
        # END SOLUTION

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        # BEGIN SOLUTION lab07.4: d loss / d logits = softmax - onehot(target), my columns only
        softmax, local, mine = ctx.saved_tensors
        g = softmax.clone()  # (b, s, V/t)
        g.scatter_add_(-1, local.unsqueeze(-1), -mine.to(g.dtype).unsqueeze(-1))
        return (g * grad.unsqueeze(-1)).to(ctx.dtype), None, None, None
        # END SOLUTION


def vocab_parallel_cross_entropy(
    local_logits: torch.Tensor,
    target: torch.Tensor,
    group: Group = None,
    *,
    vocab_size: int | None = None,
) -> torch.Tensor:
    """Per-token loss (b, s), equal on every rank, from this rank's contiguous slice of the
    vocabulary ``local_logits`` (b, s, V_p/t), without gathering the full logits.

    ``vocab_size``: columns at or beyond it are padding and are masked to -inf (None: every
    column is a real token). Computed in fp32 at least. With one rank it equals
    ``F.cross_entropy(logits, target, reduction="none")``.
    """
    if vocab_size is not None:
        check_int("vocab_size", vocab_size)
    return VocabParallelCrossEntropy.apply(local_logits, target, group, vocab_size)
