"""Gradient clipping with ZeRO (issue 29): ``minitorch_dist.zero.clip_grad_norm_`` at stages 0-3
and under ``apply_zero3`` against one process running ``torch.nn.utils.clip_grad_norm_`` and
AdamW on the whole batch, in fp64; torch's own function refuses ZeRO's parameters. Not graded.

The toy model has a tied embedding/head, a frozen layer and odd parameter counts (shards are
padded); ``MAX_NORM`` is small enough that every step clips (asserted on the reference).
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable

import pytest
import torch
from torch import nn

from minitorch_dist import launch
from minitorch_dist.data_parallel import TiedToy
from minitorch_dist.reference import make_batches, run_training
from minitorch_dist.zero import apply_zero3, clip_grad_norm_, zero_optimizer

STEPS, GBS, SEQ, VOCAB = 3, 8, 8, 31
ADAMW = {"lr": 1e-2, "weight_decay": 0.1}
MAX_NORM = 0.05
EXACT = 1e-12  # fp64: only the order of the additions differs


def _toy() -> nn.Module:
    torch.manual_seed(0)
    return TiedToy(vocab=VOCAB, hidden=5).double()


class _Clipped:
    """An optimizer that clips (``clip()``, returning the norm) right before each step."""

    def __init__(self, opt: torch.optim.Optimizer, clip: Callable[[], torch.Tensor]) -> None:
        self.opt, self.clip, self.norms = opt, clip, []

    def zero_grad(self) -> None:
        self.opt.zero_grad()

    def step(self) -> None:
        norm = self.clip()
        self.norms.append((float(norm), norm.dtype))
        self.opt.step()


def _reference(max_norm: float | None, norm_type: float = 2.0) -> tuple[dict, list]:
    model = _toy()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, **ADAMW)
    clip = (
        (lambda: torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type))
        if max_norm
        else (lambda: torch.zeros((), dtype=torch.float64))
    )
    wrapped = _Clipped(opt, clip)
    run = run_training(
        model, wrapped, make_batches(VOCAB, GBS, SEQ, STEPS), split=None, grads=lambda m, o: {}
    )
    return run.weights, wrapped.norms


def _zero_rank(rank: int, world_size: int, kind: str, norm_type: float) -> tuple[dict, list]:
    model = _toy()
    if kind == "apply_zero3":
        model = apply_zero3(model)
        opt = torch.optim.AdamW(model.parameters(), **ADAMW)
        target, weights = model, lambda: model.gather_full_params(trainable_only=True)
    else:
        opt = zero_optimizer(model, int(kind), torch.optim.AdamW, **ADAMW)
        target, weights = opt, lambda: opt.full_parameters()
    wrapped = _Clipped(opt, lambda: clip_grad_norm_(target, MAX_NORM, norm_type))
    run_training(
        model,
        wrapped,
        make_batches(VOCAB, GBS, SEQ, STEPS),
        rank=rank,
        world_size=world_size,
        grads=lambda m, o: {},
        weights=None,
    )
    return weights(), wrapped.norms


CASES = [("0", 2), ("1", 2), ("2", 2), ("3", 2), ("3", 4), ("apply_zero3", 2), ("apply_zero3", 4)]


@pytest.mark.parametrize(("kind", "world_size"), CASES)
def test_clipping_equals_one_process_clip_grad_norm(kind, world_size):
    """Catches a norm taken over this rank's shard only (each rank clips by its own factor), a
    norm summed over the ranks at stage 0 (whole gradients counted N times), clipping before
    the gradients are averaged (ZeRO-0/1 average inside step()), or a factor that is not
    torch's: the weights after 3 clipped AdamW steps equal one process's within 1e-12 (fp64),
    every rank returns torch's norm as an fp64 tensor, and every step did clip."""
    ref_weights, ref_norms = _reference(MAX_NORM)
    assert all(n > 2 * MAX_NORM for n, _ in ref_norms), ref_norms  # clipping happened
    unclipped, _ = _reference(None)
    assert max((unclipped[k] - w).abs().max().item() for k, w in ref_weights.items()) > 1e-4
    for weights, norms in launch(_zero_rank, world_size, kind, 2.0):
        assert [d for _, d in norms] == [torch.float64] * STEPS
        for (n, _), (r, _) in zip(norms, ref_norms):
            assert abs(n - r) <= EXACT * r, (norms, ref_norms)
        assert set(weights) == set(ref_weights)
        err = max((weights[k] - w).abs().max().item() for k, w in ref_weights.items())
        assert err <= EXACT, err


@pytest.mark.parametrize("kind", ["1", "apply_zero3"])
def test_inf_norm_takes_the_max_over_the_shards(kind):
    """Catches an inf-norm summed over the ranks (all-reduce SUM instead of MAX): the norm and
    the weights equal one process's with norm_type=inf."""
    ref_weights, ref_norms = _reference(MAX_NORM, math.inf)
    assert all(n > MAX_NORM for n, _ in ref_norms)
    for weights, norms in launch(_zero_rank, 2, kind, math.inf):
        assert [n for n, _ in norms] == pytest.approx([n for n, _ in ref_norms], rel=EXACT)
        err = max((weights[k] - w).abs().max().item() for k, w in ref_weights.items())
        assert err <= EXACT, err


def _torch_clip_rank(rank: int, world_size: int) -> list[str]:
    from torch.nn.utils import clip_grad_norm_ as torch_clip  # bound early: still guarded

    x = make_batches(VOCAB, 2 * world_size, SEQ, 1)[0][0][2 * rank : 2 * rank + 2]
    out = []
    for kind in ("0", "1", "2", "3", "apply_zero3"):
        model = _toy()
        if kind == "apply_zero3":
            model = apply_zero3(model)
        else:
            opt = zero_optimizer(model, int(kind), torch.optim.AdamW, **ADAMW)
        model(x).sum().backward()
        try:
            torch_clip(model.parameters(), 1.0)
            out.append(f"{kind}: silent")
        except RuntimeError as e:
            out.append(f"{kind}: {e}")
        del model
        opt = None  # noqa: F841 - the next model's optimizer replaces it
    plain = _toy()
    plain(x).sum().backward()
    norm = torch.nn.utils.clip_grad_norm_(plain.parameters(), 1e-3)  # others pass through
    out.append(f"plain: {float(norm) > 0}")
    return out


def test_torch_clip_grad_norm_on_zero_parameters_raises():
    """Catches the issue's silent failures: torch's clip_grad_norm_ on a ZeRO model (the rank's
    un-averaged norm at stages 0-1, 0.0 and no clipping at stages 2-3, a shard's own norm under
    apply_zero3) must raise, naming minitorch_dist.zero.clip_grad_norm_; on a plain model it
    still works."""
    for out in launch(_torch_clip_rank, 2):
        assert out[-1] == "plain: True"
        for line in out[:-1]:
            assert "minitorch_dist.zero.clip_grad_norm_" in line, line


def _bad_rank(rank: int, world_size: int) -> list[str]:
    errors = []
    for call in (
        lambda: clip_grad_norm_(_toy(), 1.0),
        lambda: clip_grad_norm_(zero_optimizer(_toy(), 1), 1.0, norm_type=0),
    ):
        try:
            call()
        except ValueError as e:
            errors.append(str(e))
    return errors


def test_bad_input_raises_value_error():
    """Catches a plain module clipped as if it were sharded, and a norm type that means nothing."""
    errors = launch(_bad_rank, 2)[0]
    assert len(errors) == 2 and "apply_zero3" in errors[0] and "norm_type" in errors[1]


_GUARD_SCRIPT = """
import importlib, pkgutil
import torch, torch.nn.utils as utils, torch.nn.utils.clip_grad as clip_grad
import minitorch_dist.zero as zero
from minitorch_dist import launch

def torch_functions():
    return (clip_grad._clip_grads_with_norm_, utils.clip_grads_with_norm_, utils.clip_grad_norm_)

before = torch_functions()
for m in pkgutil.iter_modules(zero.__path__):  # every module of the package, imported
    importlib.import_module("minitorch_dist.zero." + m.name)
print("import:", "untouched" if torch_functions() == before else "patched")

def rank(rank, world_size):
    model = torch.nn.Linear(4, 3)
    opt = zero.ZeroStage2(model, lr=0.1)
    model(torch.ones(2, 4)).sum().backward()
    built = "untouched" if torch_functions() == before else "patched"
    try:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        return built, "silent"
    except RuntimeError as e:
        return built, str(e)

for built, clipped in launch(rank, 2):
    print("built:", built)
    print("clip:", clipped)
"""


def test_clip_guard_installed_when_a_zero_object_is_built_not_at_import():
    """Catches the guard patching torch at import: importing every module of minitorch_dist.zero
    must leave torch's clipping functions as they are; building a ZeroStage2 installs the guard,
    and torch's clip_grad_norm_ on its (sharded) parameters still raises, naming ours."""
    run = subprocess.run(
        [sys.executable, "-c", _GUARD_SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "import: untouched", run.stdout
    assert lines.count("built: patched") == 2, run.stdout
    clips = [line for line in lines if line.startswith("clip:")]
    assert len(clips) == 2 and all("minitorch_dist.zero.clip_grad_norm_" in c for c in clips)
