"""Resume exactly, every way the package saves: train K steps, save, rebuild everything, load,
train K more; the losses, the final weights and the optimizer state, entry by entry, equal 2K
uninterrupted steps.

The matrix: ZeRO stages 0-3 (``STAGES``), ``apply_zero3`` with and without ``ignored_params``,
data parallelism with a torch optimizer, and the 3D recipe; each saved in memory (the full and
the local state dicts), in the file checkpoints (``save_checkpoint``, full and sharded), as
torch's own ``state_dict()`` of apply_zero3's pieces and their optimizer (this rank's part) and,
for data parallelism, through torch's own DCP. In fp64 on the same number of ranks the resumed
run is bit-identical; where a full state is loaded on another number of ranks (resharding) the
sums over ranks are taken in another order, so it is within 1e-12. After every load no two
parameters share a state tensor: torch's optimizers advance ``step`` in place, so a shared one
moves once per parameter per step (Adam's bias correction then drifts). Not graded.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from minitorch_dist import launch
from minitorch_dist.data_parallel import DataParallelBucket, TiedToy
from minitorch_dist.reference import full_cross_entropy, make_batches, param_values, run_training
from minitorch_dist.zero import STAGES, apply_zero3
from minitorch_dist.zero.checkpoint import load_checkpoint, save_checkpoint

K, GBS, SEQ, VOCAB = 2, 12, 8, 31  # 12 rows: 2 and 3 ranks take equal slices
ADAMW = {"lr": 1e-2, "weight_decay": 0.1}
RESHARDED = {"atol": 1e-12, "rtol": 0.0}
KINDS = ("zero0", "zero1", "zero2", "zero3", "apply_zero3", "apply_zero3_ignored", "ddp")


def _build(kind: str) -> tuple[nn.Module, Any]:
    """The model and optimizer of ``kind``, fresh, after the same seed (fp64)."""
    torch.manual_seed(0)
    model = TiedToy(vocab=VOCAB, hidden=5)  # a tied weight, a frozen layer, odd counts
    if kind.startswith("zero"):
        stage = int(kind[-1])
        params = model if stage == 3 else model.parameters()
        return model, STAGES[stage](params, torch.optim.AdamW, **ADAMW)
    if kind.startswith("apply_zero3"):
        norm = [model.norm.weight, model.norm.bias] if kind.endswith("ignored") else None
        model = apply_zero3(model, ignored_params=norm)
    else:
        model = DataParallelBucket(model, bucket_cap_mb=None)
    return model, torch.optim.AdamW(model.parameters(), **ADAMW)


def _weights(model: nn.Module, opt: Any) -> dict[str, torch.Tensor]:
    if hasattr(model, "zero3"):
        return model.gather_full_params()
    if hasattr(opt, "full_parameters"):
        return opt.full_parameters()
    return param_values(model.module)


def _optimizer_state(model: nn.Module, opt: Any) -> dict:
    """The optimizer's state as one process would save it (a collective for ZeRO)."""
    return model.zero3_state_dict(opt)[1] if hasattr(model, "zero3") else opt.state_dict()


def _live_state(model: nn.Module, opt: Any) -> list[torch.Tensor]:
    """Every tensor the optimizer will update in place (a ZeRO optimizer's: its inner one's)."""
    inner = getattr(opt, "inner", opt)
    return [v for s in inner.state.values() for v in s.values() if isinstance(v, torch.Tensor)]


def _save(how: str, model: nn.Module, opt: Any, path: str) -> Any:
    if how == "memory":
        if hasattr(model, "zero3"):
            return model.zero3_state_dict(opt)
        return model.state_dict(), opt.state_dict()
    if how == "local":
        return model.state_dict(), opt.local_state_dict()
    if how == "torch":  # apply_zero3's pieces and its optimizer's own state: this rank's part
        return model.state_dict(), opt.state_dict()
    if how == "dcp":  # torch's own checkpointing of a replicated model and optimizer
        model_sd, optim_sd = get_state_dict(model.module, opt)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=path)
        return None
    save_checkpoint(path, model, opt, step=K, sharded=how == "file_sharded")
    return None


def _load(how: str, model: nn.Module, opt: Any, path: str, saved: Any) -> None:
    if how == "torch":
        model_sd, optim_sd = saved
        model.load_state_dict(model_sd)
        opt.load_state_dict(optim_sd)
    elif how in ("memory", "local"):
        model_sd, optim_sd = saved
        if hasattr(model, "zero3"):
            model.load_zero3_state_dict(model_sd, optim_sd, opt)
            return
        model.load_state_dict(model_sd)
        (opt.load_local_state_dict if how == "local" else opt.load_state_dict)(optim_sd)
    elif how == "dcp":
        model_sd, optim_sd = get_state_dict(
            model.module, opt
        )  # the optimizer's state made up front
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=path)  # in place: tensors filled, the rest replaced
        set_state_dict(
            model.module, opt, model_state_dict=state["model"], optim_state_dict=state["optim"]
        )
    else:
        assert load_checkpoint(path, model, opt) == K


def _rank(rank: int, world_size: int, kind: str, how: str, phase: str, path: str, saved: Any):  # noqa: ANN202
    """``phase``: "whole" (2K steps), "first" (K steps, then save) or "second" (load, K more)."""
    torch.set_default_dtype(torch.float64)
    model, opt = _build(kind)
    batches = make_batches(VOCAB, GBS, SEQ, 2 * K)
    shared = 0
    if phase == "second":
        _load(how, model, opt, path, saved[rank] if how in PER_RANK else saved[0])
        live = _live_state(model, opt)
        shared = len(live) - len({id(t) for t in live})  # two parameters, one state tensor
        batches = batches[K:]
    elif phase == "first":
        batches = batches[:K]
    run = run_training(
        model,
        opt,
        batches,
        loss_fn=full_cross_entropy,
        rank=rank,
        world_size=world_size,
        grads=lambda m, o: {},
        weights=None,
    )
    out = {"losses": run.losses, "shared": shared}
    if phase == "first":
        out["saved"] = _save(how, model, opt, path)
    else:
        out["weights"] = _weights(model, opt)
        out["state"] = _optimizer_state(model, opt)
    return out


PER_RANK = ("local", "torch")  # each rank loads what it saved itself
# make quick runs these; make test (CI) all of them (each case is three launches)
QUICK = {("zero2", "file", 2), ("apply_zero3", "memory", 2), ("apply_zero3", "memory", 3)}
CASES = [
    pytest.param(
        kind,
        how,
        saved_on,
        loaded_on,
        marks=() if (kind, how, loaded_on) in QUICK else pytest.mark.slow,
    )
    for kind in KINDS
    for how in ("memory", "file", "local", "file_sharded", "dcp", "torch")
    for saved_on, loaded_on in ((2, 2), (2, 3))
    if (how in ("local", "file_sharded")) <= (kind.startswith("zero") and loaded_on == saved_on)
    and (how == "dcp") <= (kind == "ddp")
    and (how == "torch") <= (kind.startswith("apply_zero3") and loaded_on == saved_on)
]
_WHOLE: dict[tuple[str, int], list] = {}


def _whole(kind: str, world_size: int) -> list:
    if (kind, world_size) not in _WHOLE:
        _WHOLE[kind, world_size] = launch(_rank, world_size, kind, "", "whole", "", None)
    return _WHOLE[kind, world_size]


def _assert_same_state(got: dict, want: dict, tolerance: dict | None) -> None:
    """Entry by entry: the same parameters, the same states, equal (or within ``tolerance``)."""
    assert got["param_groups"] == want["param_groups"]
    assert set(got["state"]) == set(want["state"])
    for i, entries in want["state"].items():
        assert set(got["state"][i]) == set(entries), i
        for key, value in entries.items():
            mine = got["state"][i][key]
            if tolerance is None:
                assert torch.equal(torch.as_tensor(mine), torch.as_tensor(value)), (i, key)
            else:
                torch.testing.assert_close(mine, value, **tolerance, msg=f"{i} {key}")


@pytest.mark.parametrize(("kind", "how", "saved_on", "loaded_on"), CASES)
def test_a_resumed_run_equals_the_uninterrupted_one(tmp_path, kind, how, saved_on, loaded_on):
    """Catches a checkpoint that loses or mis-shards a state (Adam's m, v, step), a step counter
    shared by several parameters (advanced once per parameter), weights loaded into buffers the
    optimizer does not read (ZeRO's shards), and a resume on another number of ranks that cuts
    the shards at the wrong offsets: the resumed losses, weights and optimizer state equal the
    uninterrupted run's, bit for bit on the same ranks."""
    path = str(tmp_path / "ckpt")
    first = launch(_rank, saved_on, kind, how, "first", path, None)
    saved = [r["saved"] for r in first]
    second = launch(_rank, loaded_on, kind, how, "second", path, saved)
    whole = _whole(kind, loaded_on)
    tolerance = None if saved_on == loaded_on else RESHARDED
    for r, (resumed, ref) in enumerate(zip(second, whole)):
        assert resumed["shared"] == 0, f"rank {r}: {resumed['shared']} shared state tensors"
        losses = first[r % saved_on]["losses"] + resumed["losses"]
        if tolerance is None:
            assert losses == ref["losses"], (r, losses, ref["losses"])
            for name, w in ref["weights"].items():
                assert torch.equal(resumed["weights"][name], w), (r, name)
        else:
            assert losses[K:] == pytest.approx(ref["losses"][K:], abs=1e-12)
            for name, w in ref["weights"].items():
                torch.testing.assert_close(resumed["weights"][name], w, **tolerance)
        assert set(resumed["weights"]) == set(ref["weights"])
        _assert_same_state(resumed["state"], ref["state"], tolerance)


def _old_load(rank: int, world_size: int, saved: Any) -> dict:
    """The load as it was: what it is given is passed through to torch, uncopied."""
    from minitorch_dist.zero import transform_state

    transform_state.own_copy = lambda value: value
    return _rank(rank, world_size, "apply_zero3", "memory", "second", "", saved)


def test_the_matrix_sees_a_shared_step_tensor(tmp_path):
    """Catches a matrix too weak to see the bug it was built for: apply_zero3's state saved
    with one ``step`` tensor for all of a unit's parameters and loaded uncopied (as the package
    once did) is found sharing tensors, and the resumed run drifts from the whole one."""
    first = launch(_rank, 2, "apply_zero3", "memory", "first", "", None)
    saved = [r["saved"] for r in first]
    for _model_sd, optim_sd in saved:
        one = torch.tensor(float(K))
        for entries in optim_sd["state"].values():
            entries["step"] = one  # one tensor for every parameter (pickled as one)
    second = launch(_old_load, 2, saved)
    whole = _whole("apply_zero3", 2)
    assert second[0]["shared"] > 0
    assert first[0]["losses"] + second[0]["losses"] != whole[0]["losses"]


def _grid_rank(rank: int, world_size: int, how: str, phase: str, path: str, saved: Any):  # noqa: ANN202
    """The 3D recipe on a dp=2 x tp=2 grid: ``phase`` as in :func:`_rank`; ``how`` is "memory"
    (the stage's and ZeRO-1's full state dicts), "local" (ZeRO-1's shards) or "file" (one
    checkpoint per tp rank, saved over its dp x cp group) -- or "world", a save over every rank,
    which must be refused: the tp ranks hold different slices under the same names."""
    from minitorch_dist.grid import ProcessGrid
    from minitorch_dist.models import Llama
    from minitorch_dist.parallel3d import build_3d, rank_micro_batches, train_step
    from minitorch_dist.parallel3d.compare import TINY

    torch.manual_seed(0)
    grid = ProcessGrid(dp=2, tp=2)
    model3d = build_3d(
        Llama(TINY).to(torch.float64), grid, micro_batches=2, seq_len=16, lr=1e-2, max_norm=0.5
    )
    stage, opt = model3d.stage, model3d.optimizer
    mine = f"{path}/tp{grid.index('tp')}"  # one checkpoint per model-parallel rank
    batches = make_batches(TINY.vocab_size, 4, 16, 2 * K)
    if phase == "second":
        if how == "file":
            assert load_checkpoint(mine, stage, opt, group=grid.group("dp_cp")) == K
        else:
            model_sd, optim_sd = saved[rank]
            stage.load_state_dict(model_sd)
            (opt.load_local_state_dict if how == "local" else opt.load_state_dict)(optim_sd)
        batches = batches[K:]
    elif phase == "first":
        batches = batches[:K]
    losses = [train_step(model3d, rank_micro_batches(b, grid, 2)) for b in batches]
    out: dict[str, Any] = {"losses": losses}
    if phase == "first" and how == "world":
        try:
            save_checkpoint(path, stage, opt, step=K)
        except ValueError as e:
            out["refused"] = str(e)
    elif phase == "first" and how == "file":
        save_checkpoint(mine, stage, opt, step=K, group=grid.group("dp_cp"))
    elif phase == "first":
        local = how == "local"
        out["saved"] = (stage.state_dict(), opt.local_state_dict() if local else opt.state_dict())
    out["weights"] = {n: p.detach().clone() for n, p in model3d.named.items()}
    out["state"] = opt.state_dict()
    return out


@pytest.mark.parametrize("how", ["memory", "local", "file"])
def test_the_3d_recipe_resumes_bit_for_bit(tmp_path, how):
    """Catches a 3D checkpoint that keeps one tp rank's slices (a checkpoint writes each name
    once) or loses ZeRO-1's state over dp x cp: on a dp=2 x tp=2 grid the resumed run's losses,
    weights and optimizer state equal the uninterrupted run's, bit for bit, on every rank."""
    path = str(tmp_path)
    whole = launch(_grid_rank, 4, how, "whole", path, None)
    first = launch(_grid_rank, 4, how, "first", path, None)
    saved = [r.get("saved") for r in first]
    second = launch(_grid_rank, 4, how, "second", path, saved)
    for r, (a, b, ref) in enumerate(zip(first, second, whole)):
        assert a["losses"] + b["losses"] == ref["losses"], r
        assert set(b["weights"]) == set(ref["weights"])
        for name, w in ref["weights"].items():
            assert torch.equal(b["weights"][name], w), (r, name)
        _assert_same_state(b["state"], ref["state"], None)


def test_a_tensor_parallel_model_saved_over_every_rank_is_refused(tmp_path):
    """Catches the silent loss of all tp slices but one: a save over the whole grid raises a
    ValueError naming a tensor and the data-parallel group to save over, on every rank."""
    for out in launch(_grid_rank, 4, "world", "first", str(tmp_path), None):
        assert "differs between ranks" in out.get("refused", ""), out.get("refused")
        assert "data-parallel group" in out["refused"]
    assert not (tmp_path / "latest").exists()
