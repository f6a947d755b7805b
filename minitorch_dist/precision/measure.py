"""Chapter 2's measurements of fp8: how far a quantised result is from the exact one, and how
far a tensor's largest entry stands above a typical one (what per-tensor scaling cannot survive).
"""

from __future__ import annotations

import torch

from minitorch_dist.precision.fp8 import _check_input

__all__ = ["outlier_ratio", "relative_error"]


def relative_error(approx: torch.Tensor, exact: torch.Tensor, dim: int | None = -1) -> torch.Tensor:
    """||approx - exact|| / ||exact|| along ``dim`` (per output row by default; None: the whole).

    Per row, because an outlier row dominates a whole-tensor norm and hides the rows that lost
    their precision.
    """
    diff, exact = (approx.double() - exact.double()), exact.double()
    if dim is None:
        return diff.norm() / exact.norm()
    return diff.norm(dim=dim) / exact.norm(dim=dim)


def outlier_ratio(x: torch.Tensor) -> float:
    """amax(|x|) / rms(x): how far the largest entry stands above a typical one.

    With one scale per tensor the largest entry lands on fp8_max and a typical one near
    fp8_max / ratio; past fp8_max / (smallest normal) -- 448 / 2^-6 for E4M3 -- typical entries
    fall into the subnormals and lose mantissa bits (chapter 2, "Why it is fragile").
    """
    _check_input(x)
    x = x.detach().double()
    rms = x.pow(2).mean().sqrt()
    if rms == 0:
        raise ValueError("x must not be all zeros: its outlier ratio is undefined")
    return (x.abs().max() / rms).item()
