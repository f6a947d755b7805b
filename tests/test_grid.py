"""The process grid: dp x pp x cp x ep x tp over emulated ranks, tp innermost.

The expected groups are written out from the formula rank = ((((dp_i*pp + pp_i)*cp + cp_i)*ep
+ ep_i)*tp + tp_i), independently of the grid's own enumeration; an all-reduce of the ranks'
numbers on each group must sum exactly that group's ranks; and the data-parallel wrappers and
ZeRO of chapters 5 and 6 must work, unchanged, on the grid's dp group.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.distributed as dist

from minitorch_dist import launch
from minitorch_dist.data_parallel import DataParallelBucket, DataParallelNaive, TiedToy
from minitorch_dist.grid import AXES, GROUPS, GridLayout, ProcessGrid
from minitorch_dist.reference import (
    TIGHT,
    assert_runs_match,
    make_batches,
    reference_run,
    run_training,
)
from minitorch_dist.zero import zero_optimizer

SHAPE = {"dp": 2, "pp": 2, "tp": 2}  # 8 ranks


def _formula_groups(sizes: dict[str, int], axes: tuple[str, ...]) -> list[list[int]]:
    """Groups along ``axes`` from the rank formula: vary those axes, fix the others."""
    full = {a: sizes.get(a, 1) for a in AXES}

    def rank(c: dict[str, int]) -> int:
        r = 0
        for a in AXES:
            r = r * full[a] + c[a]
        return r

    others = [a for a in AXES if a not in axes]
    groups = []
    for fixed in itertools.product(*(range(full[a]) for a in others)):
        members = []
        for free in itertools.product(*(range(full[a]) for a in axes)):
            members.append(rank(dict(zip(others, fixed)) | dict(zip(axes, free))))
        groups.append(sorted(members))
    return sorted(groups)


def _reduce_on_every_group(rank: int, world_size: int, sizes: dict[str, int]) -> dict:
    grid = ProcessGrid(**sizes)
    out = {}
    for name in GROUPS:
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=grid.group(name))
        out[name] = {
            "sum": t.item(),
            "ranks": grid.ranks(name),
            "index": grid.index(name),
            "group_rank": dist.get_rank(grid.group(name)),
            "group_size": dist.get_world_size(grid.group(name)),
        }
    out["coords"] = grid.coords
    return out


@pytest.mark.parametrize("sizes", [SHAPE, {"pp": 2, "cp": 2, "tp": 2}, {"dp": 2, "ep": 2, "tp": 2}])
def test_groups_hold_the_ranks_of_the_formula_and_reduce_only_them(sizes: dict) -> None:
    """Catches a grid with tp outermost, a group built from the wrong axes, or an all-reduce
    that reaches ranks outside its group: on 8 ranks, every rank's group along every axis (and
    dp x cp, dp x cp x ep) is the formula's, and summing rank numbers over it gives exactly the
    sum of its members."""
    results = launch(_reduce_on_every_group, 8, sizes, timeout=60)
    for name, axes in GROUPS.items():
        want = _formula_groups(sizes, axes)
        for rank, r in enumerate(results):
            mine = next(g for g in want if rank in g)
            got = r[name]
            assert got["ranks"] == mine, f"rank {rank}, {name}"
            assert got["sum"] == sum(mine), f"rank {rank}, {name}: reduced over other ranks"
            assert got["group_size"] == len(mine)
            assert got["index"] == got["group_rank"] == mine.index(rank)
    for rank, r in enumerate(results):  # tp innermost: neighbours share a tp group
        assert r["coords"] == GridLayout(**sizes).coords(rank)
    assert [r["tp"]["ranks"] for r in results[:2]] == [[0, 1], [0, 1]]


def test_layout_round_trips_and_orders_tp_innermost() -> None:
    """Catches coordinates and rank_of that disagree, or an axis order other than dp, pp, cp,
    ep, tp (outermost first)."""
    layout = GridLayout(dp=3, pp=2, cp=1, ep=2, tp=2)
    assert layout.world_size == 24
    for rank in range(24):
        assert layout.rank_of(**layout.coords(rank)) == rank
    assert layout.coords(1) == {"dp": 0, "pp": 0, "cp": 0, "ep": 0, "tp": 1}
    assert layout.coords(2) == {"dp": 0, "pp": 0, "cp": 0, "ep": 1, "tp": 0}
    assert layout.coords(8) == {"dp": 1, "pp": 0, "cp": 0, "ep": 0, "tp": 0}
    assert layout.all_groups("tp")[:2] == [[0, 1], [2, 3]]
    assert layout.all_groups("dp")[0] == [0, 8, 16]


def test_the_map_shows_every_rank_and_each_group() -> None:
    """Catches a map that drops ranks or shows a size-1 axis as groups."""
    text = GridLayout(**SHAPE).table(gpus_per_node=4)
    lines = text.splitlines()
    assert lines[0] == "world_size 8 = dp 2 x pp 2 x cp 1 x ep 1 x tp 2  (tp innermost)"
    assert lines[1].split() == ["rank", *AXES, "node"]
    assert lines[2 + 5].split() == ["5", "1", "0", "0", "0", "1", "1"]
    assert "  tp       [0,1] [2,3] [4,5] [6,7]" in lines
    assert "  dp       [0,4] [1,5] [2,6] [3,7]" in lines
    assert not any(line.lstrip().startswith(("cp ", "ep ")) for line in lines)


@pytest.mark.parametrize(
    ("sizes", "world", "message"),
    [
        ({"dp": 3, "tp": 4}, 8, r"dp\*pp\*cp\*ep\*tp = 12 but world_size = 8"),
        ({"tp": 0}, 8, "tp must be an integer >= 1, got 0"),
        ({"pp": True}, 8, "pp must be an integer >= 1, got True"),
        ({"cp": 2.0}, 8, "cp must be an integer >= 1, got 2.0"),
    ],
)
def test_bad_shapes_name_the_constraint(sizes: dict, world: int, message: str) -> None:
    """Catches a grid that silently leaves ranks out (or builds groups of a float size)."""
    with pytest.raises(ValueError, match=message):
        GridLayout(**sizes).check_world_size(world)


def _bad_grid(rank: int, world_size: int) -> str:
    try:
        ProcessGrid(dp=3, tp=4)
    except ValueError as e:
        return str(e)
    return "no error"


def test_process_grid_refuses_a_shape_that_does_not_fill_the_world() -> None:
    """Catches the error surfacing as a hang in new_group instead of a ValueError."""
    assert all(m.startswith("dp*pp*cp*ep*tp = 12 but world_size = 8") for m in launch(_bad_grid, 8))
    with pytest.raises(ValueError, match="initialised process group"):
        ProcessGrid(dp=1)


def test_bad_names_and_ranks_are_value_errors() -> None:
    layout = GridLayout(**SHAPE)
    with pytest.raises(ValueError, match="group must be one of"):
        layout.all_groups("xp")
    with pytest.raises(ValueError, match=r"rank must be an integer in \[0, 7\]"):
        layout.coords(8)
    with pytest.raises(ValueError, match="unknown axes"):
        layout.rank_of(dq=1)


# -- the first half's data parallelism and ZeRO on the grid's dp group ------------------------
STEPS, SEQ, ROWS_PER_DP = 2, 8, 2


def _batches(replica: int) -> list:
    """Each (pp, tp) position trains on its own data, so a reduction that leaves its dp group
    mixes in different gradients and shows."""
    return make_batches(11, ROWS_PER_DP * SHAPE["dp"], SEQ, STEPS, seed=replica)


def _sgd(params) -> torch.optim.Optimizer:  # noqa: ANN001
    return torch.optim.SGD(params, lr=0.5, momentum=0.9)


def _dp_on_grid(rank: int, world_size: int, wrapper: str) -> tuple[int, object]:
    grid = ProcessGrid(**SHAPE)
    replica = grid.index("pp") * SHAPE["tp"] + grid.index("tp")
    torch.manual_seed(0)
    model = TiedToy(vocab=11)
    group = grid.group("dp")
    if wrapper == "zero1":
        opt = zero_optimizer(model, 1, lr=1e-2, group=group)
        run = run_training(
            model,
            opt,
            _batches(replica),
            rank=grid.index("dp"),
            world_size=grid.size("dp"),
            grads=lambda m, o: {},
            weights=lambda m, o: o.full_parameters(),
        )
        return replica, run
    ddp = (DataParallelNaive if wrapper == "naive" else DataParallelBucket)(model, group=group)
    names = {n for n, p in model.named_parameters() if p.requires_grad}

    def unwrapped(m: object, o: object) -> dict:
        return {n: p.detach().clone() for n, p in model.named_parameters() if n in names}

    def grads(m: object, o: object) -> dict:
        return {n: p.grad.clone() for n, p in model.named_parameters() if n in names}

    run = run_training(
        ddp,
        _sgd(model.parameters()),
        _batches(replica),
        rank=grid.index("dp"),
        world_size=grid.size("dp"),
        grads=grads,
        weights=unwrapped,
    )
    return replica, run


@pytest.mark.parametrize("wrapper", ["naive", "bucketed", "zero1"])
def test_data_parallel_and_zero_accept_the_grids_dp_group(wrapper: str) -> None:
    """Catches a wrapper that ignores its group (reducing over WORLD would average four
    replicas' different data): on 2 x 2 x 2, each dp group of two ranks trains like one process
    on its own global batch."""
    results = launch(_dp_on_grid, 8, wrapper, timeout=120)
    check = ("losses", "weights") if wrapper == "zero1" else ("losses", "grads", "weights")
    for replica in range(SHAPE["pp"] * SHAPE["tp"]):
        runs = [run for rep, run in results if rep == replica]
        assert len(runs) == SHAPE["dp"]
        if wrapper == "zero1":
            ref = reference_run(
                lambda: TiedToy(vocab=11), lambda ps: torch.optim.Adam(ps, 1e-2), _batches(replica)
            )
            assert_runs_match(runs, ref, check=check, tolerance={"atol": 1e-5, "rtol": 1e-4})
        else:
            ref = reference_run(lambda: TiedToy(vocab=11), _sgd, _batches(replica))
            assert_runs_match(runs, ref, check=check, tolerance=TIGHT)
