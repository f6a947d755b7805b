"""3D parallelism's pieces and pitfalls (chapter 11; ungraded: lab11's graded tests are in
tests/test_lab11_grid.py).

Each pitfall of the chapter is run for real: the recipe with one deliberate mistake
(``compare_grid_with_reference(bug=...)``) must FAIL the comparison with one process that the
correct recipe passes -- the proof that the graded tests catch those wrong answers. Then the
random streams per axis, the checks on bad input, and the picture of the grid.
"""

from __future__ import annotations

import re

import pytest
import torch

from minitorch_dist import launch
from minitorch_dist.grid import GridLayout, ProcessGrid
from minitorch_dist.models import Llama
from minitorch_dist.parallel3d import (
    BUGS,
    ClippedZeroStage1,
    build_3d,
    clip_coefficient,
    compare_grid_with_reference,
    stream_draws,
)
from minitorch_dist.parallel3d.compare import TINY
from minitorch_dist.parallel3d.plots import held_summary, plot_grid

PITFALLS = {
    "world": {"dp": 2, "tp": 2},  # pp = 1: stages of unequal size cannot share a collective
    "dp_only": {"cp": 2, "pp": 2, "tp": 2},
    "local_norm": {"dp": 2, "pp": 2, "tp": 2},
    "double_count": {"dp": 2, "pp": 2, "tp": 2},
    "unscaled_loss": {"dp": 2, "pp": 2, "tp": 2},
    "rank_seed": {"dp": 2, "pp": 2, "tp": 2},
}


def test_every_bug_has_a_pitfall_run():
    assert set(PITFALLS) == set(BUGS)


@pytest.mark.parametrize("bug", list(PITFALLS))
def test_each_pitfall_fails_the_comparison(bug):
    """Catches a comparison too weak to see a pitfall: with the mistake the 8 (4) ranks' losses,
    norms or weights differ from one process's beyond the tolerance, in fp64."""
    axes = PITFALLS[bug]
    compare_grid_with_reference(**axes, steps=2)  # the correct recipe passes...
    with pytest.raises(AssertionError, match="not close"):  # ...the same with the bug does not
        compare_grid_with_reference(**axes, steps=2, bug=bug)


def test_without_sequence_parallelism_too():
    """Catches a recipe that only works with sp: plain TP (activations whole between blocks,
    boundary messages of s/cp tokens) on the cp x pp x tp grid equals one process in fp64."""
    check = compare_grid_with_reference(cp=2, pp=2, tp=2, sp=False, steps=2)
    assert check.max_error < 1e-10


def test_world_group_bug_needs_equal_stages():
    with pytest.raises(ValueError, match="pp = 1"):
        compare_grid_with_reference(dp=2, pp=2, tp=1, bug="world", steps=1)
    with pytest.raises(ValueError, match="bug must be one of"):
        compare_grid_with_reference(dp=2, bug="typo", steps=1)


def test_max_norm_must_be_positive():
    with pytest.raises(ValueError, match="max_norm must be a number > 0"):
        ClippedZeroStage1(
            [torch.zeros(1, requires_grad=True)], torch.optim.Adam, grid=None, max_norm=0.0
        )


def test_clip_coefficient_is_torchs():
    """Catches a clipping factor other than torch's max_norm / (norm + 1e-6), capped at 1."""
    norm = torch.tensor(4.0, dtype=torch.float64)
    assert clip_coefficient(norm, 1.0).item() == pytest.approx(1 / (4 + 1e-6), rel=1e-15)
    assert clip_coefficient(norm, 10.0).item() == 1.0


def test_random_streams_per_axis():
    """Catches dropout streams shared inside tp regions (correlated masks over heads), streams
    that differ where replicas must agree, or the same stream in every pipeline stage."""
    layout = GridLayout(dp=2, pp=2, tp=2)
    draws = stream_draws(layout)
    first = [d["inside"][0] for d in draws]
    for rank, d in enumerate(draws):
        assert d["init"] == draws[0]["init"]  # one model everywhere
        for other in layout.group_ranks("tp", rank):
            assert d["outside"] == draws[other]["outside"]  # same activations, same mask
            if other != rank:
                assert d["inside"] != draws[other]["inside"]  # different heads, own mask
        for other in layout.group_ranks("dp", rank):
            assert d["inside"] == draws[other]["inside"]  # replicas: the same recipe
        for other in layout.group_ranks("pp", rank):
            if other != rank:
                assert d["outside"] != draws[other]["outside"]  # stages: different layers
    assert len(set(first)) == 4  # 2 stages x 2 tp ranks
    naive = stream_draws(layout, naive=True)
    assert naive[0]["inside"] == naive[1]["inside"]  # the pitfall: tp ranks drop alike
    sp = stream_draws(GridLayout(tp=2), sp=True)
    assert sp[0]["outside"] != sp[1]["outside"]  # under sp each rank holds other tokens


def _bad(rank, world_size, axes, kwargs):
    grid = ProcessGrid(**axes)
    try:
        build_3d(Llama(TINY), grid, micro_batches=2, lr=1e-3, **kwargs)
    except ValueError as e:
        return str(e)
    return None


@pytest.mark.parametrize(
    ("axes", "kwargs", "message"),
    [
        ({"pp": 4}, {"seq_len": 16}, "layers=2 < pp=4"),
        ({"cp": 2}, {"seq_len": 18}, "2 \\* cp"),
        ({"tp": 4}, {"seq_len": 18}, "tp \\(sequence parallelism\\)"),
    ],
)
def test_bad_input_names_the_constraint(axes, kwargs, message):
    errors = launch(_bad, GridLayout(**axes).world_size, axes, kwargs, timeout=60)

    assert all(e is not None and re.search(message, e) for e in errors), errors


def test_the_picture_is_drawn_from_the_ranks():
    check = compare_grid_with_reference(dp=2, pp=2, tp=2, steps=1)
    fig = plot_grid(check.held)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "rank 7\ndp1 pp1 tp1" in texts
    assert held_summary(check.held[0]["names"]) == "embed, layer 0"
    assert held_summary(check.held[7]["names"]) == "layer 1, norm, head"


def _held(dp: int, pp: int, tp: int) -> list[dict]:
    """What the ranks of a dp x pp x tp grid report (tp innermost), without launching them."""
    held = []
    for rank in range(dp * pp * tp):
        d, q, t = rank // (pp * tp), rank // tp % pp, rank % tp
        groups = {
            "dp": [x * pp * tp + q * tp + t for x in range(dp)],
            "pp": [d * pp * tp + x * tp + t for x in range(pp)],
            "cp": [rank],
            "tp": [d * pp * tp + q * tp + x for x in range(tp)],
        }
        groups["dp_cp"] = groups["dp"]
        coords = {"dp": d, "pp": q, "cp": 0, "ep": 0, "tp": t}
        names = ["embed.weight"] if q == 0 else [f"layers.{q}.attn.wq.weight", "head.weight"]
        held.append(
            {
                "coords": coords,
                "groups": groups,
                "names": names,
                "numel": 31_424,
                "zero_shard": 15_712,
            }
        )
    return held


@pytest.mark.parametrize("dp, pp, tp", [(2, 2, 2), (2, 4, 2), (1, 2, 4), (4, 2, 2), (3, 1, 2)])
def test_the_pictures_text_is_at_least_8_pt_where_the_book_shows_it(dp, pp, tp):
    """Catches grid diagrams drawn 10 inches wide in 7-point text, shown about 6 px high in the
    book's 688 px column: every text is at least 8 pt once the picture is scaled to it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from minitorch_dist.parallel3d.plots import COLUMN_IN

    fig = plot_grid(_held(dp, pp, tp), title="a long title " * 12)
    FigureCanvasAgg(fig).draw()
    shown = min(1.0, COLUMN_IN / fig.get_size_inches()[0])  # the column shrinks a wider PNG
    ax = fig.axes[0]
    texts = [*ax.texts, ax.title]
    assert len(ax.texts) == 3 * dp * pp * tp
    assert min(t.get_fontsize() * shown for t in texts) >= 8
    box = fig.bbox
    for t in texts:  # nothing drawn outside the picture (the long title wraps)
        e = t.get_window_extent()
        assert box.x0 <= e.x0 and e.x1 <= box.x1 and box.y0 <= e.y0 and e.y1 <= box.y1, t
