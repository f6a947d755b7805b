"""ZeRO as a PyTorch user trains with it (issue 29): weight-decay groups at stage 3 and after
``apply_zero3`` (original names), ``ignored_params``, initial weights checked or broadcast,
non-elementwise optimizers refused, ``load_zero3_state_dict`` validating before writing. Every
training run is compared with one process running AdamW with the same groups, in fp64. Not
graded.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minitorch_dist import launch
from minitorch_dist.data_parallel import TiedToy
from minitorch_dist.reference import make_batches, run_training
from minitorch_dist.zero import ZeroStage1, ZeroStage3, apply_zero3, zero_optimizer

STEPS, GBS, SEQ, VOCAB = 3, 8, 8, 31
DEFAULTS = {"lr": 1e-2, "weight_decay": 0.1}
EXACT = 1e-12  # fp64


def _toy(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return TiedToy(vocab=VOCAB, hidden=5).double()


def _no_decay(name: str) -> bool:
    return name.endswith("bias") or name.startswith("norm.")


def _groups(model: nn.Module) -> list[dict]:
    """The usual recipe: no weight decay (and here another lr) on biases and norms, by name."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return [
        {"params": [p for n, p in named if not _no_decay(n)]},
        {"params": [p for n, p in named if _no_decay(n)], "weight_decay": 0.0, "lr": 5e-3},
    ]


def _batches() -> list:
    return make_batches(VOCAB, GBS, SEQ, STEPS)


def _reference(grad_acc: int = 1) -> dict[str, torch.Tensor]:
    model = _toy()
    opt = torch.optim.AdamW(_groups(model), **DEFAULTS)
    return run_training(
        model, opt, _batches(), split=None, grad_acc=grad_acc, grads=lambda m, o: {}
    ).weights


def _max_error(weights: dict, ref: dict) -> float:
    assert set(weights) == set(ref), set(weights) ^ set(ref)
    return max((weights[k] - w).abs().max().item() for k, w in ref.items())


def _grouped_rank(rank: int, world_size: int, kind: str, grad_acc: int) -> dict:
    model = _toy()
    info: dict = {}
    if kind.startswith("stage3"):  # stage3_roots: the norm joins the tied weight at the root
        units = [model.up, model.down] if kind == "stage3_roots" else None
        opt = ZeroStage3(
            model, torch.optim.AdamW, param_groups=_groups(model), units=units, **DEFAULTS
        )
        weights = opt.full_parameters
        info["units"] = len(opt.units)
    else:
        ignored = [model.norm.weight, model.norm.bias] if kind == "ignored" else None
        model = apply_zero3(model, ignored_params=ignored)
        opt = torch.optim.AdamW(_groups(model), **DEFAULTS)  # built from the original names
        weights = lambda: model.gather_full_params(trainable_only=True)  # noqa: E731
        info["shapes"] = {n: tuple(p.shape) for n, p in model.named_parameters()}
    run_training(
        model,
        opt,
        _batches(),
        rank=rank,
        world_size=world_size,
        grad_acc=grad_acc,
        grads=lambda m, o: {},
        weights=None,
    )
    info["weights"] = weights()  # ignored_params too: whole on every rank, under their names
    return info


@pytest.mark.parametrize(
    ("kind", "world_size"),
    [("stage3", 2), ("stage3", 4), ("stage3_roots", 2), ("apply_zero3", 2), ("apply_zero3", 4)],
)
def test_weight_decay_groups_at_stage_3_equal_one_process(kind, world_size):
    """Catches groups that are ignored at stage 3 (biases and norms decayed, one lr), a unit
    whose flat shard mixes two groups, a second root unit never gathered, names that are not the original ones after apply_zero3
    (the name-based recipe then puts everything in one group): 3 AdamW steps with two groups
    equal one process's with the same groups within 1e-12 (fp64); the grouping matters."""
    ref = _reference()
    model = _toy()
    flat = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], **DEFAULTS)
    one_group = run_training(model, flat, _batches(), split=None, grads=lambda m, o: {}).weights
    assert _max_error(one_group, ref) > 1e-4  # the groups change the result
    for out in launch(_grouped_rank, world_size, kind, 1):
        assert _max_error(out["weights"], ref) <= EXACT
        if kind == "stage3":
            assert out["units"] > 4  # the toy's 4 blocks and root, cut by group
        elif kind == "stage3_roots":
            assert out["units"] == 6  # up, down and the root, each cut in two groups
        else:
            names = {n for n, p in _toy().named_parameters()}
            assert set(out["shapes"]) == names  # original names, each this rank's piece


@pytest.mark.parametrize("grad_acc", [1, 2])
def test_ignored_params_stay_whole_and_are_averaged(grad_acc):
    """Catches ignored parameters that are sharded anyway, never averaged (each rank trains its
    own norm: the replicas drift), or averaged wrongly over micro-batches: the LayerNorm stays
    whole under its names on every rank, and with 1 or 2 micro-batches the model equals one
    process's within 1e-12, on every rank."""
    ref = _reference(grad_acc)
    for out in launch(_grouped_rank, 2, "ignored", grad_acc):
        assert out["shapes"]["norm.weight"] == (5,) and out["shapes"]["norm.bias"] == (5,)
        assert _max_error(out["weights"], ref) <= EXACT


def _differing_rank(rank: int, world_size: int) -> dict:
    errors = []
    for build in (
        lambda m: ZeroStage1(m, torch.optim.AdamW),
        lambda m: zero_optimizer(m, 3),
        lambda m: apply_zero3(m),
    ):
        try:
            build(_toy(seed=rank))  # pretrained weights loaded on rank 0 only, say
            errors.append("accepted")
        except ValueError as e:
            errors.append(str(e))
    model = _toy(seed=rank)  # differs, but rank 0's is broadcast
    opt = ZeroStage1(
        model, torch.optim.AdamW, sync_params=True, param_groups=_groups(model), **DEFAULTS
    )
    run_training(
        model,
        opt,
        _batches(),
        rank=rank,
        world_size=world_size,
        grads=lambda m, o: {},
        weights=None,
    )
    model3 = apply_zero3(_toy(seed=rank), sync_params=True)
    return {
        "errors": errors,
        "weights": opt.full_parameters(),
        "zero3": model3.gather_full_params(),
    }


def test_differing_initial_weights_are_refused_or_broadcast():
    """Catches the silent mixture of the issue (each element from whichever rank owns it): ranks
    built from different seeds make ZeroStage1, ZeroStage3 and apply_zero3 raise a ValueError
    naming a parameter; with sync_params=True rank 0's weights win and training equals one
    process's started from them (fp64, 1e-12)."""
    ref = _reference()
    init = {n: p.detach() for n, p in _toy().named_parameters()}
    for out in launch(_differing_rank, 2):
        assert len(out["errors"]) == 3
        for e in out["errors"]:
            assert "differs between rank 0 and rank 1" in e and "parameter 'embed.weight'" in e, e
            assert "sync_params=True" in e
        assert _max_error(out["weights"], ref) <= EXACT
        assert all(torch.equal(init[n], w) for n, w in out["zero3"].items())


class FactoredAdam(torch.optim.Optimizer):
    """Adafactor's idea in a few lines: a 2-D parameter's second moment kept as a row and a
    column mean (not elementwise), an elementwise one for 1-D parameters."""

    def __init__(self, params, lr: float = 1e-2) -> None:  # noqa: ANN001
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None) -> None:  # noqa: ANN001
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g2 = p.grad**2 + 1e-30
                if p.dim() == 2:
                    st = self.state[p]
                    st["row"] = st.get("row", 0) * 0.9 + 0.1 * g2.mean(1)
                    st["col"] = st.get("col", 0) * 0.9 + 0.1 * g2.mean(0)
                    v = st["row"][:, None] * st["col"][None, :] / st["row"].mean()
                else:
                    st = self.state[p]
                    st["v"] = st.get("v", 0) * 0.9 + 0.1 * g2
                    v = st["v"]
                p.add_(p.grad / v.sqrt(), alpha=-group["lr"])


class TrustRatioSGD(torch.optim.Optimizer):
    """LAMB's idea: an elementwise state-free step, scaled per tensor by ||p|| / ||g||."""

    def __init__(self, params, lr: float = 1e-2) -> None:  # noqa: ANN001
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None) -> None:  # noqa: ANN001
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    ratio = p.norm() / (p.grad.norm() + 1e-12)
                    p.add_(p.grad * ratio, alpha=-group["lr"])


def _optimizer_rank(rank: int, world_size: int) -> list[str]:
    out = []
    for cls in (FactoredAdam, TrustRatioSGD):
        try:
            zero_optimizer(_toy(), 2, cls)
            out.append("accepted")
        except ValueError as e:
            out.append(str(e))
    model = apply_zero3(_toy())
    opt = FactoredAdam(model.parameters())
    x = make_batches(VOCAB, 2 * world_size, SEQ, 1)[0][0][2 * rank : 2 * rank + 2]
    model(x).sum().backward()
    try:
        opt.step()
        out.append("accepted")
    except ValueError as e:
        out.append(str(e))
    return out


def test_non_elementwise_optimizers_are_refused():
    """Catches the issue's Adafactor, accepted and trained 4.4e-2 away from one process: a
    factored state and a per-tensor trust ratio are refused with a ValueError, by the ZeRO
    optimizers at construction and under apply_zero3 at the first step."""
    factored, trust, zero3 = launch(_optimizer_rank, 2)[0]
    assert "FactoredAdam" in factored and "'row'" in factored and "elementwise" in factored
    assert "TrustRatioSGD" in trust and "elementwise" in trust
    assert "FactoredAdam" in zero3 and "elementwise" in zero3


def _load_rank(rank: int, world_size: int) -> dict:
    model = apply_zero3(_toy())
    opt = torch.optim.AdamW(model.parameters(), **DEFAULTS)
    run_training(
        model,
        opt,
        _batches(),
        rank=rank,
        world_size=world_size,
        grads=lambda m, o: {},
        weights=None,
    )
    sd, osd = model.zero3_state_dict(opt)
    before = (
        model.gather_full_params(),
        {k: v.clone() for k, v in opt.state_dict()["state"][0].items()},
    )
    fresh = {k: torch.zeros_like(v) for k, v in sd.items()}  # what a bad load would write
    bad = {
        "shape": {**fresh, "up.weight": torch.zeros(3, 3, dtype=torch.float64)},
        "missing": {k: v for k, v in fresh.items() if k != "down.bias"},
        "extra": {**fresh, "up.wieght": torch.zeros(1)},
        "optim": (
            fresh,
            {
                **osd,
                "state": {
                    **osd["state"],
                    "norm.weight": {
                        **osd["state"]["norm.weight"],
                        "exp_avg": torch.zeros(4, dtype=torch.float64),
                    },
                },
            },
        ),
    }
    errors = {}
    for what, args in bad.items():
        model_sd, optim = args if isinstance(args, tuple) else (args, None)
        try:
            model.load_zero3_state_dict(model_sd, optim, opt)
            errors[what] = "accepted"
        except ValueError as e:
            errors[what] = str(e)
    after = (model.gather_full_params(), opt.state_dict()["state"][0])
    unchanged = all(torch.equal(before[0][k], after[0][k]) for k in before[0]) and all(
        torch.equal(before[1][k], after[1][k]) for k in before[1]
    )
    model.load_zero3_state_dict(sd, osd, opt)  # a good one still loads
    return {"errors": errors, "unchanged": unchanged}


def test_load_zero3_state_dict_validates_before_writing():
    """Catches the issue's load that names no parameter and overwrites shards before failing: a
    wrong shape, a missing key, a misspelt extra key and a wrong optimizer state shape each
    raise a ValueError naming the key, and the weights and optimizer state are unchanged."""
    out = launch(_load_rank, 2)[0]
    e = out["errors"]
    assert "'up.weight'" in e["shape"] and "(3, 3)" in e["shape"]
    assert "'down.bias'" in e["missing"] and "missing" in e["missing"]
    assert "'up.wieght'" in e["extra"] and "unexpected" in e["extra"]
    assert "'norm.weight'" in e["optim"] and "exp_avg" in e["optim"]
    assert out["unchanged"]


def _named_errors(rank: int, world_size: int) -> dict:
    """Differing initial weights under an optimizer built from a bare iterator and from
    ``named_parameters()``; then a full state whose ``exp_avg`` has the wrong shape."""
    out = {}
    for how, params in (
        ("bare", _toy(rank).parameters()),
        ("named", _toy(rank).named_parameters()),
    ):
        try:
            ZeroStage1(params, torch.optim.AdamW)
            out[how] = "accepted"
        except ValueError as e:
            out[how] = str(e)
    opt = ZeroStage1(_toy().named_parameters(), torch.optim.AdamW)
    state = {i: {"step": torch.tensor(1.0), "exp_avg": torch.zeros(3)} for i in range(9)}
    try:
        opt.load_state_dict({"state": state, "param_groups": opt.state_dict()["param_groups"]})
        out["load"] = "accepted"
    except ValueError as e:
        out["load"] = str(e)
    return out


def test_errors_name_the_parameter_by_its_module_path():
    """Catches errors that name "param0" where the user cannot tell which layer is meant: with
    ``named_parameters()`` the initial-weights check and a bad load name the module path; with
    a bare ``parameters()`` iterator the message gives the position and shape and says how to
    get the name."""
    out = launch(_named_errors, 2)[0]
    assert "parameter 0 of the optimizer (shape (31, 5)" in out["bare"], out["bare"]
    assert "model.named_parameters()" in out["bare"]
    assert "parameter 'embed.weight' differs between rank 0 and rank 1" in out["named"], out
    assert "of parameter 'embed.weight' has shape (3,)" in out["load"], out["load"]
