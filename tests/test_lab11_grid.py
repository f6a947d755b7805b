"""Training on the grid (lab 11, task lab11.1): the composed recipe against one process.

The tiny Llama on 8 emulated ranks as dp x pp x tp = 2 x 2 x 2 (ZeRO-1 over dp, 1F1B over pp,
TP + SP inside each stage) and as cp x pp x tp = 2 x 2 x 2, trained 3 Adam steps with gradient
clipping, against the single-process reference of :mod:`minitorch_dist.reference` (the same
Adam, ``torch.nn.utils.clip_grad_norm_``): every rank's loss per step, the gradient norm per step
before clipping, and every weight a rank holds after the last step (its tp slice of the
reference's), in fp64 to 1e-10 and in fp32. Each docstring names the wrong answers the test
catches; tests/test_parallel3d.py runs each of those wrong answers and checks that this
comparison fails on it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import pytest
import torch

from minitorch_dist.parallel3d import compare_grid_with_reference

DP_PP_TP = {"dp": 2, "pp": 2, "tp": 2}
CP_PP_TP = {"cp": 2, "pp": 2, "tp": 2}

# what a failing comparison of the grid against one process most likely means, by its quantity
WHY = {
    "gradient norm": (
        "the gradient norm before clipping is the square root of one sum of squares over every "
        "parameter: each rank's squares (the replicated norm weights counted once over tp, "
        "their mask), all-reduced over dp x cp (the ZeRO shards), tp (the slices) and pp (the "
        "stages)"
    ),
    "loss": (
        "the step loss is the global batch's token mean on every rank: the pipeline divides by "
        "m, and the ranks of dp x cp average"
    ),
    "weight": (
        "a weight after the steps differs: ZeRO averages the gradients over dp x cp (the ranks "
        "holding the same weights), and clipping scales by the grid's norm"
    ),
}


@contextlib.contextmanager
def _explained() -> Iterator[None]:
    """Adds to a failing comparison what it most likely means (WHY)."""
    try:
        yield
    except AssertionError as e:
        why = next((w for key, w in WHY.items() if key in str(e).split(":")[0]), None)
        if why is None:
            raise
        raise AssertionError(f"{e}\n{why}") from e


@pytest.mark.lab11
@pytest.mark.task("lab11.1")
def test_dp_pp_tp_trains_like_one_process():
    """lab11.1. Catches ZeRO's gradient average over the wrong group (WORLD, or dp alone with
    cp), the pipeline's loss not divided by m, a step loss that is not the global mean on every
    rank, a gradient norm not reduced over tp and pp, or one that counts the replicated norm
    weights t times: losses, norms and every weight after 3 steps equal one process's in fp64."""
    with _explained():
        check = compare_grid_with_reference(**DP_PP_TP, dtype=torch.float64, steps=3)
    assert check.max_error < 1e-10
    assert len(check.comparisons) == 8
    assert max(check.norms) > 0.5  # clipping to 0.5 was active on every step compared
    assert min(check.norms) > 0.5


@pytest.mark.lab11
@pytest.mark.task("lab11.1")
def test_cp_pp_tp_trains_like_one_process():
    """lab11.1. Catches the cp ranks' gradients never averaged (ZeRO-1 over dp alone), RoPE
    positions of the shard instead of the whole sequence, ring attention over the wrong group:
    with cp instead of dp, losses, norms and weights after 3 steps equal one process's in fp64."""
    with _explained():
        check = compare_grid_with_reference(**CP_PP_TP, dtype=torch.float64, steps=3)
    assert check.max_error < 1e-10


@pytest.mark.lab11
@pytest.mark.task("lab11.1")
@pytest.mark.parametrize("axes", [DP_PP_TP, CP_PP_TP], ids=["dp-pp-tp", "cp-pp-tp"])
def test_fp32_trains_like_one_process(axes):
    """lab11.1. The same in fp32: losses and norms to TIGHT, weights to FP32_ADAM."""
    with _explained():
        check = compare_grid_with_reference(**axes, dtype=torch.float32, steps=3)
    assert check.max_error < 2e-5


@pytest.mark.lab11
@pytest.mark.task("lab11.1")
def test_each_rank_holds_its_stage_its_slice_and_a_zero_shard():
    """lab11.1. Catches TP applied to the whole model instead of the stage, ZeRO over the wrong
    group (a shard of 1/8 or of the whole instead of 1/(dp cp)): each rank holds its stage's
    parameters only, and its ZeRO-1 shard is ceil(numel / 2) elements."""
    with _explained():
        check = compare_grid_with_reference(**DP_PP_TP, dtype=torch.float64, steps=1)
    for rank, held in enumerate(check.held):
        stage = held["coords"]["pp"]
        layers = {n.split(".")[1] for n in held["names"] if n.startswith("layers.")}
        assert layers == {str(stage)}, f"rank {rank}"
        assert ("embed.weight" in held["names"]) == (stage == 0)
        assert ("head.weight" in held["names"]) == (stage == 1)
        assert held["zero_shard"] == math.ceil(held["numel"] / 2), f"rank {rank}"
        assert held["groups"]["dp_cp"] == held["groups"]["dp"]
