"""ZeRO stages 1-3 and optimizer offload (lab 6: tasks lab06.1 - lab06.4).

Every stage is checked against the single-process reference, ``torch.optim.Adam`` on the whole
batch: the weights after a few fp32 steps must agree to a tight tolerance, on 2, 4 and 8 emulated
ranks, with parameter counts that do not divide by the number of ranks. Two models: ``TiedToy``
(293 trainable parameters, a prime's neighbour that divides by none of 2, 4, 8; a weight tied
between the embedding and the head, a frozen layer, a buffer) on 2, 4 and 8 ranks, and the tiny
Llama ``UNEVEN`` (34,710 parameters, not divisible by 4 or 8; every Llama's count is even, so at
2 ranks it divides) on 2 and 4. Then what a rank holds (bytes of its storages) against
``model_state_bytes``, and what it sends (``CommCounter``) against the ring formulas of ZeRO's
section 7, exactly.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn

from minitorch_dist import launch
from minitorch_dist.comm import CommCounter, collective_bytes
from minitorch_dist.memory import model_state_bytes
from minitorch_dist.models import Llama
from minitorch_dist.models.checkpointing import apply_torch_checkpointing
from minitorch_dist.reference import make_batches, param_values, scale_mistake
from minitorch_dist.zero import (
    ZeroStage3,
    build_units,
    shard_numel,
    storage_bytes,
    zero_optimizer,
)
from minitorch_dist.zero.measure import expected_comm_bytes, zero_comm_bytes, zero_table
from minitorch_dist.zero.train import (
    UNEVEN,
    assert_zero_matches,
    compare_with_reference,
    rank_rows,
)

ATOL, RTOL = 1e-5, 1e-4  # fp32, lr 1e-3, 3 steps: measured errors are about 1e-6
F32 = 4


class TiedToy(nn.Module):
    """Token ids (b, s) -> logits: tied embedding/head, a frozen layer, a buffer; 293 trainable
    parameters (77 tied + 104 + 98 + 14)."""

    def __init__(self, vocab: int = 11, hidden: int = 7) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.register_buffer("position", 0.1 * torch.randn(16, hidden))
        self.frozen = nn.Linear(hidden, hidden)
        self.frozen.requires_grad_(False)
        self.up = nn.Linear(hidden, 13)
        self.down = nn.Linear(13, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position[: tokens.shape[1]]  # (b, s, h)
        x = x + torch.tanh(self.frozen(x))
        x = x + self.down(torch.relu(self.up(x)))
        return self.head(self.norm(x))  # (b, s, vocab)


TOY = {"model_fn": TiedToy, "vocab": 11}


def _check(result: dict) -> None:
    """Every rank's weights after the last step and the ranks' mean losses, through the harness."""
    assert_zero_matches(result, atol=ATOL, rtol=RTOL)


def test_toy_and_uneven_counts_do_not_divide():
    """Guards the premise of the tests: the parameter counts need padding."""
    toy = sum(p.numel() for p in TiedToy().parameters() if p.requires_grad)
    assert toy == 293 and all(toy % n for n in (2, 4, 8))
    assert UNEVEN.num_params() == 34_710 and all(UNEVEN.num_params() % n for n in (4, 8))


# -- the shared flat-buffer helper (given) -----------------------------------------------------
def test_units_pad_to_a_multiple_of_the_ranks():
    """Catches a shard size rounded down (the last rank's elements lost) or padding that is
    not zero."""
    model = TiedToy()
    units = build_units(model, 4)
    assert [u.name for u in units] == ["", "up", "down", "norm"]  # the tied weight -> the root
    assert [u.numel for u in units] == [77, 104, 98, 14]
    assert (
        [u.shard_numel for u in units]
        == [20, 26, 25, 4]
        == [shard_numel(n, 4) for n in (77, 104, 98, 14)]
    )
    root = units[0]
    flat = root.flatten([p.detach() for p in root.params])
    assert flat.shape == (80,) and torch.equal(flat[77:], torch.zeros(3))
    assert root.shard_range(3) == (60, 80)
    assert torch.equal(root.views(flat)[0], model.embed.weight)
    assert all(p.requires_grad for u in units for p in u.params)  # the frozen layer is left out


def test_storage_bytes_counts_shared_storage_once():
    """Catches counting a buffer once per view (a flat buffer would be counted many times)."""
    flat = torch.zeros(10)
    assert storage_bytes([flat, flat[:5], flat[5:].view(5, 1)]) == 40
    assert storage_bytes([flat, torch.zeros(3)]) == 52


def _bad_inputs(rank: int, world_size: int) -> list[str]:
    model = TiedToy()
    errors = []
    for kwargs in (
        {"lr": -1.0},
        {"betas": (0.9, 1.5)},
        {"offload": "yes"},
        {"prefetch": 1},
        {"units": [nn.Linear(2, 2)]},
        {"units": [model.up, model.up]},
    ):
        try:
            ZeroStage3(TiedToy(), **kwargs) if "units" not in kwargs else ZeroStage3(
                model, **kwargs
            )
        except ValueError as e:
            errors.append(str(e).split(",")[0])
    try:
        zero_optimizer(model, 4)
    except ValueError as e:
        errors.append(str(e))
    try:
        zero_optimizer(TiedToy().requires_grad_(False), 1)
    except ValueError as e:
        errors.append(str(e))
    return errors


def test_bad_input_raises_value_error():
    """Catches a nonsense setting silently accepted (negative lr, stage 4, a foreign module)."""
    errors = launch(_bad_inputs, 1)[0]
    assert len(errors) == 8, errors
    assert "stage must be one of 0, 1, 2, 3" in errors[6]
    assert "no trainable parameters" in errors[7]
    with pytest.raises(ValueError, match="initialised process group"):
        zero_optimizer(TiedToy(), 1)


def test_comm_formula_of_zero_section_7():
    """Catches a wrong factor: 2 Psi for stages 0-2, 3 Psi for stage 3, times (N-1)/N."""
    psi, n = 7_000_000_000, 64
    assert zero_comm_bytes(psi, 0, n) == 2 * 2 * psi * 63 / 64
    assert zero_comm_bytes(psi, 1, n) == zero_comm_bytes(psi, 2, n) == zero_comm_bytes(psi, 0, n)
    assert zero_comm_bytes(psi, 3, n) == 1.5 * zero_comm_bytes(psi, 2, n)
    with pytest.raises(ValueError, match="stage must be one of"):
        zero_comm_bytes(psi, 5, n)


@pytest.mark.parametrize("world_size", [2, 8])
def test_stage0_baseline_matches_adam(world_size):
    """Catches a broken baseline (given code): plain data parallelism must equal Adam."""
    _check(compare_with_reference(0, world_size, **TOY))


# -- lab06.1 - lab06.3: every stage equals single-process Adam ---------------------------------
STAGE_TASK = {1: "lab06.1", 2: "lab06.2", 3: "lab06.3"}


def _stage(stage: int, *rest):
    """A parameter set of stage ``stage``, marked with that stage's task."""
    return pytest.param(stage, *rest, marks=pytest.mark.task(STAGE_TASK[stage]))


CASES = [_stage(stage, n, "toy") for stage in (1, 2, 3) for n in (2, 4, 8)]
CASES += [_stage(stage, n, "llama") for stage in (1, 2, 3) for n in (2, 4)]


@pytest.mark.lab06
@pytest.mark.parametrize(("stage", "world_size", "model"), CASES)
def test_stage_matches_single_process_adam(stage, world_size, model):
    """Catches a shard updated from another rank's slice, padding that leaks into the
    parameters, a tied weight reduced twice, a stale gather. (Not a gradient summed but not
    averaged: Adam is nearly scale-invariant; test_sgd_step_uses_the_rank_averaged_gradient.)"""
    options = TOY if model == "toy" else {}
    _check(compare_with_reference(stage, world_size, **options))


@pytest.mark.lab06
@pytest.mark.task("lab06.3")
def test_stage3_without_prefetch_and_with_nested_units():
    """Catches prefetching needed for correctness, or units that only work at the top level
    (here each block's attention and MLP are units; the norms fall to the root unit)."""
    _check(compare_with_reference(3, 4, prefetch=False))
    nested = lambda model: [m for block in model.layers for m in (block.attn, block.mlp)]  # noqa: E731
    _check(compare_with_reference(3, 2, units=nested))


def _checkpointed_llama() -> nn.Module:
    # recompute each block in backward (torch's non-reentrant checkpoint)
    return apply_torch_checkpointing(Llama(UNEVEN), "full")


@pytest.mark.lab06
@pytest.mark.task("lab06.3")
def test_stage3_survives_activation_checkpointing():
    """Catches a unit freed by its forward pass when recomputation runs it again inside backward
    (the units are each block's attention and MLP, whose forward the recomputation calls)."""
    _check(compare_with_reference(3, 2, model_fn=_checkpointed_llama, units=_nested))
    calls = launch(_checkpointed_calls, 2)[0]  # and no third gather for the recomputation
    assert calls["all_gather"] == 2 * calls["units"] and calls["reduce_scatter"] == calls["units"]


def _nested(model: nn.Module) -> list[nn.Module]:
    return [m for block in model.layers for m in (block.attn, block.mlp)]


def _checkpointed_calls(rank: int, world_size: int) -> dict:
    torch.manual_seed(0)
    model = _checkpointed_llama()
    opt = ZeroStage3(model, units=_nested)
    with CommCounter() as cc:
        model(torch.zeros(1, 4, dtype=torch.long)).sum().backward()
    return {**cc.calls, "units": len(opt.units)}


# -- what a rank holds ---------------------------------------------------------------------
def _held(rank: int, world_size: int, stage: int, offload: bool) -> dict:
    torch.manual_seed(0)
    model = Llama(UNEVEN)
    opt = zero_optimizer(model, stage, lr=1e-3, offload=offload)
    batch = rank_rows(make_batches(256, 2 * world_size, 16, 1)[0], rank, world_size)
    nn.functional.cross_entropy(model(batch[0]).flatten(0, 1), batch[1].flatten()).backward()
    after_backward = {
        "grads_alive": sum(p.grad is not None for p in model.parameters()),
        "full_params": storage_bytes(u.full for u in opt.units),
    }
    opt.step()
    return {
        "held": opt.held_bytes(),
        "units": [(u.numel, u.shard_numel) for u in opt.units],
        "devices": sorted({t.device.type for t in opt.offloaded_tensors()}),
        **after_backward,
    }


@pytest.mark.lab06
@pytest.mark.parametrize("stage", [_stage(1), _stage(2), _stage(3)])
def test_rank_holds_what_model_state_bytes_predicts(stage):
    """Catches a stage that keeps a whole copy it should shard (or a shard it should not):
    bytes held after a step, counted from the storages, against the padded shards exactly and
    against model_state_bytes(recipe="fp32") within 3 %."""
    n = 4
    out = launch(_held, n, stage, False)[0]
    padded = sum(n * s for _, s in out["units"])
    shard = sum(s for _, s in out["units"])
    steps = 4 * len(out["units"])  # Adam's 4-byte step counter per shard tensor
    want = {
        "params": F32 * (shard if stage == 3 else padded),
        "grads": F32 * (shard if stage >= 2 else padded),
        "optimizer": 2 * F32 * shard + steps,
    }
    if stage == 3:
        assert out["held"]["params"] <= want["params"], (
            f"after the step a rank holds {out['held']['params']} bytes of parameters, its "
            f"shards are {want['params']}: the gathered parameters were never freed (resize "
            "full's storage to 0)"
        )
    assert {k: out["held"][k] for k in want} == want
    predicted = model_state_bytes(UNEVEN.num_params(), zero_stage=stage, dp=n, recipe="fp32")
    for key in ("params", "grads", "optimizer", "total"):
        assert out["held"][key] == pytest.approx(predicted[key], rel=0.03), key


@pytest.mark.lab06
@pytest.mark.task("lab06.2")
def test_stage2_frees_whole_gradients_in_backward():
    """Catches ZeRO-2 that keeps the whole gradients until the step (then it saves nothing at
    the peak): after backward no parameter holds a .grad."""
    out = launch(_held, 2, 2, False)[0]
    assert out["grads_alive"] == 0


@pytest.mark.lab06
@pytest.mark.task("lab06.3")
def test_stage3_frees_whole_parameters_after_backward():
    """Catches gathered parameters that are never freed: after backward every unit's full
    buffer is empty and no whole gradient is left."""
    out = launch(_held, 2, 3, False)[0]
    assert out["full_params"] == 0, (
        f"after backward the units' full buffers still hold {out['full_params']} bytes: the "
        "gathered parameters were never freed (resize full's storage to 0)"
    )
    assert out["grads_alive"] == 0


# -- lab06.3: the next unit is prefetched --------------------------------------------------
def _prefetch_states(rank: int, world_size: int, prefetch: bool) -> list[str]:
    torch.manual_seed(0)
    model = Llama(UNEVEN)
    opt = ZeroStage3(model, prefetch=prefetch)
    seen = []
    by_module = {id(u.module): u for u in opt.units}
    nxt = {
        id(model.layers[0]): by_module[id(model.layers[1])],
        id(model.layers[1]): by_module[id(model.norm)],
    }
    for block in model.layers:  # registered after ZeRO's hooks: runs once the unit is gathered
        block.register_forward_pre_hook(
            lambda m, a: seen.append((by_module[id(m)].state, nxt[id(m)].state))
        )
    model(torch.zeros(1, 4, dtype=torch.long)).sum().backward()
    return seen


@pytest.mark.lab06
@pytest.mark.task("lab06.3")
def test_stage3_prefetches_the_next_unit():
    """Catches no prefetching: while a block computes, the next unit's all-gather has already
    been started (with prefetch=False it has not)."""
    on = launch(_prefetch_states, 2, True)[0]
    off = launch(_prefetch_states, 2, False)[0]
    assert [s for s, _ in on] == [s for s, _ in off] == ["gathered", "gathered"], (
        f"each block's own unit when it computes: {[s for s, _ in on]} (prefetch) and "
        f"{[s for s, _ in off]} (without): a unit must be gathered, waited for, before its "
        "forward runs"
    )
    assert all(nxt in ("gathering", "gathered") for _, nxt in on), (
        f"with prefetch=True the next unit is {[n for _, n in on]} while a block computes: "
        "_pre_forward must start the next unit's all-gather (without waiting) once its own is in"
    )
    assert all(nxt == "free" for _, nxt in off), (
        f"with prefetch=False the next unit is {[n for _, n in off]}: nothing may be gathered ahead"
    )


# -- communication: exactly the ring bytes of ZeRO's section 7 --------------------------------
def _comm(rank: int, world_size: int, stage: int) -> dict:
    torch.manual_seed(0)
    model = TiedToy()
    opt = zero_optimizer(model, stage, lr=1e-3)
    batch = rank_rows(make_batches(11, 2 * world_size, 8, 1)[0], rank, world_size)
    with CommCounter() as cc:
        model(batch[0]).sum().backward()
        opt.step()
    return {
        "sent": cc.total_bytes_sent,
        "calls": dict(cc.calls),
        "expected": expected_comm_bytes(opt),
        "units": len(opt.units),
        "padded": sum(u.padded_numel for u in opt.units),
    }


@pytest.mark.lab06
@pytest.mark.parametrize("stage", [_stage(1), _stage(2), _stage(3)])
@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_bytes_sent_per_step_are_2_or_3_psi(stage, world_size):
    """Catches a stage 1/2 that all-reduces (twice the bytes) or a stage 3 that does not gather
    again in backward: per step, 2 (N-1)/N Psi at stages 1-2 and 3 (N-1)/N Psi at stage 3."""
    out = launch(_comm, world_size, stage)[0]
    k = out["units"]
    passes = 2 if stage < 3 else 3
    want_calls = {"reduce_scatter": k, "all_gather": (passes - 1) * k}
    assert out["calls"] == want_calls, (
        f"ZeRO-{stage} on {world_size} ranks called {out['calls']} per step, not {want_calls} "
        f"({k} units): each unit's gradient is reduce-scattered once (an all-reduce sends twice "
        "the bytes and leaves every rank the whole gradient), and its parameters all-gathered "
        + ("once after the update" if stage < 3 else "before forward and again before backward")
    )
    psi_bytes = F32 * out["padded"]  # Psi rounded up to whole shards
    want = passes * collective_bytes("all_gather", psi_bytes, world_size)
    assert out["sent"] == out["expected"] == want, (
        f"ZeRO-{stage} on {world_size} ranks sent {out['sent']} bytes per step (the tracker "
        f"expects {out['expected']}), not {passes} (N - 1)/N Psi = {want}: more means a "
        "collective too many or the whole gradient reduced, less a gather skipped"
    )


# -- lab06.4: offload ----------------------------------------------------------------------
@pytest.mark.lab06
@pytest.mark.task("lab06.4")
@pytest.mark.parametrize(("stage", "world_size"), [(1, 2), (2, 4), (2, 8), (3, 4)])
def test_offload_matches_single_process_adam(stage, world_size):
    """Catches an update that never reaches the device's parameters, or one applied twice."""
    result = compare_with_reference(stage, world_size, offload=True, **TOY)
    torch.manual_seed(0)  # compare_with_reference's seed: the initial parameters
    initial = {n: p.detach() for n, p in TiedToy().named_parameters() if p.requires_grad}
    unchanged = [
        n for n, w in result["zero"].items() if n in initial and torch.equal(w, initial[n])
    ]
    assert not unchanged, (
        f"parameters {unchanged} never moved: the update stayed on the CPU masters (copy them "
        "back into the device's shards after Adam's step)"
    )
    _check(result)


@pytest.mark.lab06
@pytest.mark.task("lab06.4")
def test_offload_moves_the_optimizer_states_to_cpu_memory():
    """Catches offload that leaves m and v on the device, or forgets the fp32 master copy:
    the device keeps no optimizer bytes; the CPU keeps master, m and v of the shard (12 S)."""
    n = 4
    out = launch(_held, n, 2, True)[0]
    shard = sum(s for _, s in out["units"])
    assert out["held"]["optimizer"] == 0, (
        f"the device holds {out['held']['optimizer']} optimizer bytes: with offload, Adam's m "
        "and v (and the fp32 master) live in CPU memory, none on the device"
    )
    want = 3 * F32 * shard + 4 * len(out["units"])
    got = out["held"]["offloaded"]
    assert got == want, (
        f"the CPU holds {got} bytes, not 12 bytes per shard element (fp32 master, m, v) plus a "
        f"step counter per unit = {want}: "
        + (
            "the fp32 master copy or a state is missing"
            if got < want
            else "more than one fp32 master, m and v per shard element: keep those in CPU "
            "memory and nothing else (no second copy of the states or of the gradients)"
        )
    )
    assert out["devices"] == ["cpu"], f"optimizer states on {out['devices']}, not the CPU"
    predicted = model_state_bytes(
        UNEVEN.num_params(), zero_stage=2, dp=n, recipe="fp32", offload=True
    )
    assert out["held"]["total"] == pytest.approx(predicted["total"], rel=0.03)


# -- the tracker's measurement, the table of the lab, and the predictor ----------------------
@pytest.mark.lab06
@pytest.mark.task("lab06.3")  # every stage's table; it needs stage 3 last
@pytest.mark.slow
def test_tracker_table_matches_estimator_and_ring_formula():
    """Catches a measurement that drifts from the estimator (> 3 %) or from the exact ring
    bytes, for stages 0-3 on 2, 4 and 8 ranks; and a predictor widget that disagrees with it."""
    from minitorch_dist.memory import predict

    rows = zero_table(UNEVEN, world_sizes=(2, 4, 8), micro_batch=1, seq_len=8)
    assert len(rows) == 12
    for row in rows:
        measured, predicted = row["states"], row["predicted"]
        for key in ("params", "grads", "optimizer", "total"):
            assert measured[key] == pytest.approx(predicted[key], rel=0.03), (row["stage"], key)
        assert row["comm"]["total"] == row["expected_comm"]
        assert row["comm"]["total"] == pytest.approx(row["formula_comm"], rel=0.03)
        shown = predict(UNEVEN, 8, 1, "none", row["stage"], row["dp"], recipe="fp32")
        for key in ("params", "grads", "optimizer"):
            assert shown[key] == pytest.approx(measured[key], rel=0.03), (row["stage"], key)


def test_no_process_group_leaks_into_the_test_process():
    """Catches a helper that leaves a (fake) process group initialised in the parent."""
    assert not dist.is_initialized()


# -- the predictor's offload switch (given code) -------------------------------------------
def test_predictor_offload_moves_the_optimizer_to_the_cpu_row():
    """Catches offload that leaves the optimizer on the device, counts the CPU bytes in the
    device total, or forgets the fp32 master copy an fp32 recipe still needs on the CPU."""
    from minitorch_dist.memory import predict
    from minitorch_dist.viz import render_prediction

    plain = predict("llama-3-8b", 4096, 1, "full", 2, 8)
    off = predict("llama-3-8b", 4096, 1, "full", 2, 8, offload=True)
    n = 8_030_261_248  # Llama-3-8B's parameter count
    shard = -(-n // 8)
    assert "cpu" not in plain and off["optimizer"] == 0 and off["cpu"] == 12 * shard
    assert off["total"] == plain["total"] - plain["optimizer"]
    fp32 = predict("llama-3-8b", 4096, 1, "full", 3, 8, recipe="fp32", offload=True)
    assert fp32["cpu"] == 12 * shard  # master copy + m + v, though the recipe keeps no master
    assert f'data-category="cpu" data-bytes="{off["cpu"]}"' in render_prediction(off)


def test_predictor_widget_has_an_offload_switch():
    """Catches an offload control that is not wired to predict(), or that changes the
    keywords of a configuration without offload (chapter 1's widget must read as before)."""
    pytest.importorskip("ipywidgets")
    from minitorch_dist.memory import predict
    from minitorch_dist.viz import memory_predictor

    widget = memory_predictor(preset="llama-2-7b", zero_stage=2, dp=8)
    assert "offload" not in widget.values()
    widget.controls["offload"].value = True
    assert widget.values()["offload"] is True
    assert widget.result == predict(**widget.values()) and widget.result["optimizer"] == 0
    assert 'data-category="cpu"' in widget.view.value


# -- averaging and accumulation, with a scale-sensitive optimizer ------------------------------
# Adam hides a gradient N times too large (its update g / sqrt(v) barely changes), so the stage
# tests above cannot tell a sum from a mean. Here the optimizer is SGD, whose update is lr times
# the gradient: one step, against one process on the whole batch through the shared harness. A
# mistake that only rescales the gradient is named by ``scale_mistake``: N times the reference's
# (summed, not averaged) or, with identical micro-batches, 1/g of it (the gradient shard
# overwritten with ``copy_`` instead of accumulated with ``add_``).
LR = 0.1


def _initial() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)  # compare_with_reference's seed: the weights both sides start from
    return param_values(TiedToy())


def _check_sgd(result: dict, world_size: int, grad_acc: int = 1) -> None:
    """The update (weights after one step minus before) against the reference's, then weights."""
    start = _initial()
    ours = {n: w - start[n] for n, w in result["zero"].items()}
    want = {n: w - start[n] for n, w in result["reference"].items()}
    mistake = scale_mistake(ours, want, world_size, grad_acc)
    assert mistake is None, mistake
    assert_zero_matches(result, atol=ATOL, rtol=RTOL)


@pytest.mark.lab06
@pytest.mark.parametrize("stage", [_stage(1), _stage(2), _stage(3)])
def test_sgd_step_uses_the_rank_averaged_gradient(stage: int) -> None:
    """Catches a gradient summed but not averaged over the 4 ranks: with SGD the step would be
    4 times the reference's (Adam would hide it)."""
    result = compare_with_reference(
        stage, 4, steps=1, lr=LR, optimizer_class=torch.optim.SGD, **TOY
    )
    _check_sgd(result, 4)


def _repeated_micro_batches(world_size: int, grad_acc: int) -> list:
    """One global batch in which each rank's grad_acc micro-batches are the same rows."""
    inputs, targets = make_batches(TOY["vocab"], 2 * world_size, 8, 1)[0]
    rows = [slice(2 * r, 2 * r + 2) for r in range(world_size)]
    return [
        (
            torch.cat([inputs[s] for s in rows for _ in range(grad_acc)]),
            torch.cat([targets[s] for s in rows for _ in range(grad_acc)]),
        )
    ]


@pytest.mark.lab06
@pytest.mark.parametrize("stage", [_stage(1), _stage(2), _stage(3)])
def test_micro_batch_gradients_accumulate(stage: int) -> None:
    """Catches a gradient shard written with copy_ instead of add_ (stages 2 and 3 reduce every
    micro-batch): with 3 identical micro-batches per step the step would be 1/3 of the
    reference's. Also an accumulation lost between backward passes at stage 1."""
    grad_acc = 3
    result = compare_with_reference(
        stage,
        2,
        lr=LR,
        optimizer_class=torch.optim.SGD,
        grad_acc=grad_acc,
        batches=_repeated_micro_batches(2, grad_acc),
        **TOY,
    )
    _check_sgd(result, 2, grad_acc)
