"""The alpha-beta model, the nccl-tests bandwidths, and the drawings of chapter 5.

Expected values come from the formulas (Thakur et al. 2005; Patarasuk and Yuan 2009; nccl-tests
doc/PERFORMANCE.md), and the drawings' cells from what each collective must leave on each rank.
Not graded: none of this is a lab task.
"""

from __future__ import annotations

import pytest
import torch

from minitorch_dist import launch
from minitorch_dist.comm.cost import (
    algorithm_bandwidth,
    bus_bandwidth,
    collective_time,
    multi_node_ring_bandwidth,
)
from minitorch_dist.comm.plots import (
    COLLECTIVES,
    plot_alpha_beta,
    plot_collectives,
    plot_ring,
    ring_states,
    run_collective,
)
from minitorch_dist.data_parallel import (
    DataParallelBucket,
    DataParallelNaive,
    batch_slice,
    make_batches,
)
from minitorch_dist.data_parallel.plots import plot_step_timelines
from minitorch_dist.data_parallel.timeline import overlap_fraction, record_step
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy


def test_ring_time_is_latency_plus_bandwidth_terms() -> None:
    """Catches a wrong message count: 2(n-1) messages of S/n for all-reduce, n-1 for a half."""
    a, bw, S = 1e-5, 1e9, 8e6
    assert collective_time("all_reduce", S, 8, alpha=a, bandwidth=bw) == pytest.approx(
        14 * a + 14 / 8 * S / bw
    )
    assert collective_time("all_gather", S, 8, alpha=a, bandwidth=bw) == pytest.approx(
        7 * a + 7 / 8 * S / bw
    )
    assert collective_time("all_reduce", S, 1, alpha=a, bandwidth=bw) == 0


def test_recursive_doubling_takes_log_steps_of_the_whole_vector() -> None:
    """Catches log2 rounded down for n that is not a power of two."""
    a, bw, S = 1e-5, 1e9, 1e3
    kw = dict(alpha=a, bandwidth=bw, algorithm="recursive_doubling")
    assert collective_time("all_reduce", S, 8, **kw) == pytest.approx(3 * (a + S / bw))
    assert collective_time("all_reduce", S, 5, **kw) == pytest.approx(3 * (a + S / bw))


def test_multi_node_rings_share_every_port_of_the_node() -> None:
    """Catches the single-link model of a cluster: with one port per GPU (eight per node) the
    rings' bound is the node's eight ports together, or NVLink when that is slower."""
    nvlink, nic = 450e9, 50e9
    kw = dict(intra_bandwidth=nvlink, nic_bandwidth=nic)
    assert multi_node_ring_bandwidth(**kw, nics_per_node=8, nodes=2) == 400e9
    assert multi_node_ring_bandwidth(**kw, nics_per_node=1, nodes=2) == 50e9
    assert multi_node_ring_bandwidth(**kw, nics_per_node=8, nodes=1) == nvlink
    slow = dict(intra_bandwidth=100e9, nic_bandwidth=nic)
    assert multi_node_ring_bandwidth(**slow, nics_per_node=8, nodes=4) == 100e9
    with pytest.raises(ValueError, match="nics_per_node"):
        multi_node_ring_bandwidth(**kw, nics_per_node=0, nodes=2)


def test_bus_bandwidth_factors_follow_nccl_tests() -> None:
    """Catches a factor of n/(n-1) the wrong way up, or one for the wrong op."""
    S, t = 2**30, 0.01
    assert algorithm_bandwidth(S, t) == S / t
    assert bus_bandwidth("all_reduce", S, t, 8) == pytest.approx(S / t * 14 / 8)
    assert bus_bandwidth("all_gather", S, t, 8) == pytest.approx(S / t * 7 / 8)
    assert bus_bandwidth("broadcast", S, t, 8) == pytest.approx(S / t)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: collective_time("all_reduce", 1, 2, alpha=-1, bandwidth=1), "alpha must be"),
        (lambda: collective_time("all_reduce", 1, 2, alpha=0, bandwidth=0), "bandwidth must"),
        (lambda: collective_time("nope", 1, 2, alpha=0, bandwidth=1), "op must be one of"),
        (
            lambda: collective_time(
                "all_gather", 1, 2, alpha=0, bandwidth=1, algorithm="recursive_doubling"
            ),
            "all_reduce only",
        ),
        (lambda: bus_bandwidth("all_reduce", 1, 0.0, 2), "seconds must be > 0"),
        (lambda: bus_bandwidth("all_reduce", 1, 1.0, 0), "world_size must be"),
    ],
)
def test_cost_functions_reject_bad_input(call, message: str) -> None:  # noqa: ANN001
    """Catches nonsense (negative latency, zero time) turning into a number."""
    with pytest.raises(ValueError, match=message):
        call()


def _cells(ranks: tuple, chunk: int) -> tuple:
    return (ranks, chunk)


def test_live_collectives_leave_what_the_figure_says() -> None:
    """Catches a drawing that does not match what the collectives did on 4 gloo ranks."""
    n, everyone = 4, (0, 1, 2, 3)
    states = {op: launch(run_collective, n, op) for op in COLLECTIVES}
    after = {op: [a for _, a in per_rank] for op, per_rank in states.items()}
    own = [[_cells((r,), j) for j in range(n)] for r in range(n)]
    assert [b for b, _ in states["all_reduce"]] == own
    assert after["all_reduce"] == [[_cells(everyone, j) for j in range(n)]] * n
    assert after["broadcast"] == [own[0]] * n
    assert after["reduce"] == [[_cells(everyone, j) for j in range(n)]] + [[None] * n] * 3
    assert after["reduce_scatter"] == [
        [_cells(everyone, j) if j == r else None for j in range(n)] for r in range(n)
    ]
    assert after["all_gather"] == [[_cells((j,), j) for j in range(n)]] * n
    assert after["all_to_all"] == [[_cells((j,), r) for j in range(n)] for r in range(n)]
    assert after["send_recv"][1] == own[0] and after["send_recv"][2] == [None] * n
    assert len(plot_collectives(states).axes) == 2 * len(COLLECTIVES)


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_simulated_ring_ends_with_every_sum_everywhere(n: int) -> None:
    """Catches a ring drawing whose schedule does not complete the all-reduce."""
    steps = ring_states(n)
    assert len(steps) == 2 * (n - 1) + 1
    middle = steps[n - 1][1]  # after the reduce-scatter: rank r owns the sum of chunk r
    assert all(middle[r][r] == (tuple(range(n)), r) for r in range(n))
    assert steps[-1][1] == [[(tuple(range(n)), j) for j in range(n)]] * n
    assert len(plot_ring(n).axes) == len(steps)


def test_alpha_beta_figure_draws_both_algorithms() -> None:
    """Catches a figure missing an algorithm's curve."""
    fig = plot_alpha_beta(8, 1e-5, 5e10)
    assert len(fig.axes[0].lines) == 2


def _timelines(rank: int, world_size: int) -> dict:
    x, y = make_batches(256, 2 * world_size, 16, 1)[0]
    x, y = batch_slice(x, rank, world_size), batch_slice(y, rank, world_size)
    out = {}
    wrappers = [
        ("naive", DataParallelNaive),
        ("bucketed", lambda m: DataParallelBucket(m, bucket_cap_mb=0.02)),
    ]
    for name, wrap in wrappers:
        torch.manual_seed(0)
        model = wrap(Llama(LlamaConfig.from_preset("tiny")))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        out[name] = record_step(model, opt, x, y, cross_entropy)
        assert model.timeline is None  # recording is switched off again
    return out


def test_step_timelines_record_and_draw() -> None:
    """Catches a timeline without the phase marks the figure needs, or a naive wrapper credited
    with overlap it cannot have."""
    timelines = launch(_timelines, 2)[0]
    for tl in timelines.values():
        kinds = [k for k, _, _ in tl.events]
        for mark in ("forward_start", "backward_start", "sync_start", "sync_end", "step_end"):
            assert mark in kinds
    assert overlap_fraction(timelines["naive"]) == 0.0
    assert 0.0 <= overlap_fraction(timelines["bucketed"]) <= 1.0
    assert len(plot_step_timelines(timelines).axes) == 2
    with pytest.raises(ValueError, match="at least one"):
        plot_step_timelines({})
    with pytest.raises(ValueError, match="data-parallel wrappers"):
        record_step(torch.nn.Linear(2, 2), None, None, None, None)
