"""Column- and row-parallel linear layers, cut from a full ``nn.Linear`` (Megatron-LM, section 3).

A linear layer y = x W^T + b with W of shape (out, in) can be split over t ranks two ways:

    column-parallel   rank r keeps rows r*out/t ... (r+1)*out/t of W (and of b): it computes
                      a slice of the outputs, y_r = x W_r^T + b_r, from the WHOLE input x
    row-parallel      rank r keeps columns r*in/t ... (r+1)*in/t of W: from its slice of the
                      input it computes a partial sum x_r W_r^T; the sum over ranks is y

Chained, column then row (an MLP; attention's heads then wo), they need no communication in
between: the column layer's output slice is exactly the row layer's input slice. The bias of the
row-parallel layer is added ONCE, after the partial sums are reduced -- adding it on every rank
before the sum would add it t times.

Under sequence parallelism (``sp=True``) the input of a column-parallel layer is this rank's
s/t tokens and is all-gathered first; the output of a row-parallel layer is reduce-scattered to
s/t tokens instead of all-reduced.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minitorch_dist.checks import check_bool, check_divisible
from minitorch_dist.comm.groups import Group, group_rank, group_size
from minitorch_dist.tensor_parallel.functions import (
    copy_to_tp,
    gather_from_sp,
    reduce_from_tp,
    reduce_scatter_to_sp,
)

__all__ = ["ColumnParallelLinear", "RowParallelLinear"]


class ColumnParallelLinear(nn.Module):
    """This rank's block of output rows of a linear layer: (b, s, in) -> (b, s, out/t).

    ``enter_region`` applies f (or, under sp, the all-gather) to the input; pass False when the
    caller did it once for several layers that share one input (wq, wk, wv; w1, w3), so that the
    backward all-reduces their summed input gradient once instead of once per layer.
    """

    def __init__(
        self,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        group: Group,
        *,
        in_features: int,
        out_features: int,
        sp: bool = False,
        enter_region: bool = True,
    ) -> None:
        super().__init__()
        self.group, self.sp, self.enter_region = group, check_bool("sp", sp), enter_region
        self.in_features, self.out_features = in_features, out_features  # of the full layer
        self.weight = nn.Parameter(weight)  # (out/t, in)
        self.bias = nn.Parameter(bias) if bias is not None else None  # (out/t,)

    @classmethod
    def from_linear(
        cls,
        linear: nn.Linear,
        group: Group,
        *,
        sp: bool = False,
        enter_region: bool = True,
        index: int | None = None,
        parts: int | None = None,
    ) -> ColumnParallelLinear:
        """Cut rank r's contiguous block of rows out of ``linear`` (the full master weight).

        ``index``/``parts`` override the block (default: this rank of t): GQA with fewer kv heads
        than ranks gives each rank a copy of one kv head (``index = r // (t / kv_heads)`` of
        ``parts = kv_heads``). ValueError unless out_features divides by ``parts``.
        """
        t = group_size(group)
        index = group_rank(group) if index is None else index
        parts = t if parts is None else parts
        check_divisible("out_features", linear.out_features, "tp", parts)
        # BEGIN SOLUTION lab07.2: keep block `index` of `parts` of the weight's rows (and bias)
        rows = linear.out_features // parts
        keep = slice(index * rows, (index + 1) * rows)  # contiguous, not every t-th row
        weight = linear.weight.detach()[keep].clone()  # (out/t, in)
        bias = linear.bias.detach()[keep].clone() if linear.bias is not None else None
        # END SOLUTION
        return cls(
            weight,
            bias,
            group,
            in_features=linear.in_features,
            out_features=linear.out_features,
            sp=sp,
            enter_region=enter_region,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION lab07.2: enter the region (f, or the all-gather under sp), then multiply
        if self.enter_region:
            x = gather_from_sp(x, self.group) if self.sp else copy_to_tp(x, self.group)
        return F.linear(x, self.weight, self.bias)  # (b, s, in) @ (in, out/t) -> (b, s, out/t)
        # END SOLUTION

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features} "
            f"(this rank: {self.weight.shape[0]}), sp={self.sp}"
        )


class RowParallelLinear(nn.Module):
    """This rank's block of input columns of a linear layer: (b, s, in/t) -> (b, s, out), the
    partial sums reduced over the group (reduce-scattered along s under sp)."""

    def __init__(
        self,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        group: Group,
        *,
        in_features: int,
        out_features: int,
        sp: bool = False,
    ) -> None:
        super().__init__()
        self.group, self.sp = group, check_bool("sp", sp)
        self.in_features, self.out_features = in_features, out_features  # of the full layer
        self.weight = nn.Parameter(weight)  # (out, in/t)
        self.bias = nn.Parameter(bias) if bias is not None else None  # (out,): whole, replicated

    @classmethod
    def from_linear(cls, linear: nn.Linear, group: Group, *, sp: bool = False) -> RowParallelLinear:
        """Cut rank r's contiguous block of columns out of ``linear``; the bias stays whole.
        ValueError unless in_features divides by the group size."""
        t, r = group_size(group), group_rank(group)
        check_divisible("in_features", linear.in_features, "tp", t)
        # BEGIN SOLUTION lab07.2: keep block r of t of the weight's columns; the bias stays whole
        cols = linear.in_features // t
        weight = linear.weight.detach()[:, r * cols : (r + 1) * cols].clone()  # (out, in/t)
        bias = linear.bias.detach().clone() if linear.bias is not None else None
        # END SOLUTION
        return cls(
            weight,
            bias,
            group,
            in_features=linear.in_features,
            out_features=linear.out_features,
            sp=sp,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION lab07.2: partial product, reduce (g, or reduce-scatter under sp), bias once
        y = F.linear(x, self.weight)  # (b, s, in/t) @ (in/t, out) -> (b, s, out): a partial sum
        y = reduce_scatter_to_sp(y, self.group) if self.sp else reduce_from_tp(y, self.group)
        return y + self.bias if self.bias is not None else y  # added once, after the sum
        # END SOLUTION

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features} (this rank: {self.weight.shape[1]}), "
            f"out_features={self.out_features}, sp={self.sp}"
        )
