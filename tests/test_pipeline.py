"""Pipeline parallelism (lab 9: tasks lab09.1 - lab09.4).

Every schedule is checked on emulated ranks against the single-process reference with the same
number of micro-batches m (``reference_run`` with ``grad_acc = m``), in fp64: the loss, every
gradient of the first step and every weight after two SGD steps, on 2 and 4 ranks. Then what the
runtime measured (live micro-batches per stage, p2p bytes per peer) against the closed forms,
and the simulator's makespan against the bubble formulas. The tests of each task reach that
task's code first: lab09.1's run the given GPipe schedule, lab09.3's simulate hand-written or
stored action lists (tests/fixtures/schedules.json), so that each fails on its own stub in the
student release and no test computes another task's answer. Each docstring names the bug the
test catches.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from minitorch_dist import launch
from minitorch_dist.launching.launcher import RankError
from minitorch_dist.models import Llama
from minitorch_dist.pipeline import (
    DEEP,
    TINY,
    Action,
    Schedule,
    ScheduleDeadlock,
    bubble_fraction,
    bubble_share,
    build_stage,
    compare_with_reference,
    count_pp_bytes,
    first_stage_activation_factor,
    make_schedule,
    micro_batch_list,
    p2p_bytes,
    run_pipeline,
    run_schedule,
    simulate,
)
from minitorch_dist.reference import make_batches, reference_run

F64 = 8


# -- the schedules' expected lists, stored (tests/fixtures/make_fixtures.py writes them) -------
_SCHEDULES = json.loads((Path(__file__).parent / "fixtures" / "schedules.json").read_text())
_ACTION = re.compile(r"^([FBW])(\d+)(?:\.(\d+))?$")


def _actions(lists: list[list[str]]) -> list[list[Action]]:
    """Stored names to actions: "F3" -> Action("F", 3), "B2.1" -> Action("B", 2, 1)."""
    out = []
    for names in lists:
        parts = [_ACTION.match(name).groups() for name in names]
        out.append([Action(op, int(mb), int(chunk or 0)) for op, mb, chunk in parts])
    return out


def one_f_one_b(p: int, m: int) -> Schedule:
    """1F1B (Narayanan et al. 2021, 2.2.1) as stored: rank r runs p - r - 1 forwards before its
    first backward, then one forward and one backward in turn."""
    return Schedule("1f1b", p, m, 1, _actions(_SCHEDULES["1f1b"][f"{p},{m}"]))


def megatron_interleaved(p: int, m: int, v: int) -> list[list[Action]]:
    """Megatron-LM's interleaved order (its get_model_chunk_id and warm-up count), as stored."""
    return _actions(_SCHEDULES["interleaved"][f"{p},{m},{v}"])


# -- lab09.1: a stage, on the given GPipe schedule ---------------------------------------------
@pytest.mark.lab09
@pytest.mark.task("lab09.1")
@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 3)])
def test_gpipe_stage_matches_one_process(pp, m):
    """Catches a stage that loses the graph between ranks (input not a leaf with requires_grad),
    sends to the wrong neighbour, frees activations before backward, or forgets the 1/m: loss,
    every gradient and the weights after 2 SGD steps equal one process's in fp64."""
    comparisons = compare_with_reference(pp, "gpipe", m, steps=2)
    assert len(comparisons) == pp
    assert "loss" in comparisons[-1].errors  # the last stage's rank compared the loss


@pytest.mark.lab09
@pytest.mark.task("lab09.1")
def test_loss_is_divided_by_the_number_of_micro_batches():
    """Catches the missing 1/m: with m = 4 the last stage's losses sum to the step's mean loss
    (not 4 times it) and the gradients equal the reference's (not 4 times them)."""
    results, batches = run_pipeline(2, "gpipe", 4)
    ref = reference_run(
        lambda: Llama(TINY), lambda ps: torch.optim.SGD(ps, lr=0.1), batches, dtype=torch.float64
    )
    ratio = results[1]["run"].loss / ref.losses[0]
    assert ratio == pytest.approx(1, rel=1e-6), (  # fp32 loss
        f"the step's loss is {ratio:.4g} times one process's"
        + (
            ": each micro-batch's loss was not divided by the number of micro-batches (m = 4)"
            if ratio == pytest.approx(4, rel=1e-6)
            else ""
        )
    )
    assert len(results[1]["run"].losses) == 4
    compare_with_reference(2, "gpipe", 4)


@pytest.mark.lab09
@pytest.mark.task("lab09.1")
@pytest.mark.parametrize(("pp", "m"), [(2, 3), (4, 2)])
def test_gpipe_keeps_every_micro_batch_alive(pp, m):
    """Catches a stage that does not keep (or never frees) its activations: under GPipe the
    runtime counts m micro-batches alive on every rank, and none after the step."""
    results, _ = run_pipeline(pp, "gpipe", m)
    peaks = [r["run"].peak_in_flight for r in results]
    assert peaks == [m] * pp, (
        f"GPipe on {pp} ranks, m = {m}: at most {peaks} micro-batches alive per rank, not all m: "
        "forward must keep each micro-batch's input and output until its backward"
    )
    left = [r["run"].in_flight[-1] for r in results]
    assert left == [0] * pp, (
        f"micro-batches still kept after the step, per rank: {left}: backward must free what "
        "forward kept for it (drop the saved input and output)"
    )


@pytest.mark.lab09
@pytest.mark.task("lab09.1")
def test_p2p_bytes_are_bsh_per_boundary_per_micro_batch_each_way():
    """Catches activations sent to the previous rank or gradients to the next, extra messages
    (the token ids, the loss, a second copy) or missing ones: counted bytes per peer equal
    m * b * s * h * 8 (fp64) forward and backward across each boundary, exactly."""
    pp, m, b, s = 4, 3, 2, 8
    counts = count_pp_bytes(pp, "gpipe", m, micro_batch_size=b, seq_len=s)
    one = p2p_bytes(micro_batch=b, seq_len=s, hidden=DEEP.hidden, bytes_per_element=F64)
    assert one == b * s * DEEP.hidden * F64
    for r, c in enumerate(counts):
        want_to = {r + 1: m * one} if r < pp - 1 else {}
        want_to.update({r - 1: m * one} if r > 0 else {})
        assert c["sent_to"] == want_to, f"rank {r}"
        assert c["received_from"] == want_to, f"rank {r}"


def _starved(rank: int, world_size: int) -> str:
    torch.manual_seed(0)
    stage = build_stage(Llama(TINY).double(), rank, world_size, recv_timeout=1.0)
    schedule = make_schedule("gpipe", world_size, 2)
    batch = make_batches(TINY.vocab_size, 2, 8, 1)[0]
    if rank == 1:  # rank 0 never sends: rank 1 must time out, naming its stage
        run_schedule(schedule, stage, micro_batch_list(batch, 2))
    return "ok"


@pytest.mark.lab09
@pytest.mark.task("lab09.1")
def test_a_missing_activation_times_out_naming_the_stage():
    """Catches a receive that waits forever: a stage whose activation never comes raises a
    timeout naming the stage and what it waited for, within seconds."""
    with pytest.raises(RankError, match=r"stage 1 .*activation of micro-batch 0") as info:
        launch(_starved, 2, timeout=30)
    assert info.value.rank == 1 and "TimeoutError" in info.value.exc_type


# -- lab09.2: 1F1B and interleaved 1F1B action lists, on the runtime ----------------------------
@pytest.mark.lab09
@pytest.mark.task("lab09.2")
@pytest.mark.parametrize(
    ("kind", "pp", "m", "v"),
    [
        ("1f1b", 2, 3, 1),
        ("1f1b", 4, 6, 1),
        ("1f1b", 4, 2, 1),
        ("interleaved", 2, 4, 2),
        ("interleaved", 4, 4, 2),
    ],
)
def test_schedule_matches_one_process(kind, pp, m, v):
    """Catches a schedule that drops or repeats a micro-batch, runs a backward before its
    forward, or places chunks on the wrong rank (a deadlock then times out): loss, gradients and
    weights after 2 steps equal one process's in fp64."""
    compare_with_reference(pp, kind, m, virtual_stages=v, steps=2)


@pytest.mark.lab09
@pytest.mark.task("lab09.2")
@pytest.mark.parametrize(("pp", "m"), [(4, 8), (4, 2), (2, 1), (5, 9), (3, 5)])
def test_1f1b_lists_and_measured_peak(pp, m):
    """Catches a warm-up off by one (p - r forwards, or p - r - 2): the lists equal 1F1B's
    stored in tests/fixtures/schedules.json where stored (not for (5, 9) and (3, 5), so a table
    of the stored lists is no schedule), and the runtime measures min(p - r, m) micro-batches
    alive on rank r."""
    schedule = make_schedule("1f1b", pp, m)
    for r, actions in enumerate(schedule.actions):
        first_b = next(i for i, a in enumerate(actions) if a.op == "B")
        assert first_b == min(pp - r, m), (
            f"rank {r} runs {first_b} forwards before its first backward, not min(p - r, m) = "
            f"{min(pp - r, m)}: 1F1B's warm-up forwards are p - r - 1 (at most m), then one "
            "F/B pair at a time"
        )
    if f"{pp},{m}" in _SCHEDULES["1f1b"]:
        assert schedule.actions == one_f_one_b(pp, m).actions
    results, _ = run_pipeline(pp, schedule, m)
    assert [r["run"].peak_in_flight for r in results] == [min(pp - r, m) for r in range(pp)]


@pytest.mark.lab09
@pytest.mark.task("lab09.2")
@pytest.mark.parametrize(("pp", "m", "v"), [(2, 4, 2), (4, 8, 2), (2, 2, 3), (4, 4, 1)])
def test_interleaved_lists_are_megatrons(pp, m, v):
    """Catches chunks visited in the wrong order (the backward must run the chunks in reverse),
    micro-batch groups of the wrong size and 1F1B's warm-up reused for the interleaved one:
    the lists equal Megatron-LM's order and warm-up, 2 (p - r - 1) + (v - 1) p."""
    got, want = make_schedule("interleaved", pp, m, v).actions, megatron_interleaved(pp, m, v)
    for r, (ours, theirs) in enumerate(zip(got, want)):
        warm_ours = next(i for i, a in enumerate(ours) if a.op == "B")
        warm = next(i for i, a in enumerate(theirs) if a.op == "B")
        assert ours == theirs, (
            f"p = {pp}, m = {m}, v = {v}: rank {r}'s list {ours} is not Megatron-LM's {theirs}"
            + (
                f": {warm_ours} warm-up forwards, not 2 (p - r - 1) + (v - 1) p = {warm} "
                "(capped at m v)"
                if warm_ours != warm
                else ": chunks in the wrong order (forward chunk 0 to v - 1 in groups of p "
                "micro-batches; backward in reverse)"
            )
        )


@pytest.mark.lab09
@pytest.mark.task("lab09.2")
def test_interleaved_measured_peak():
    """Catches a warm-up that keeps too few or too many chunk-micro-batches alive: the runtime
    measures min(2 (p - r - 1) + (v - 1) p + 1, m v) on rank r, and on the first rank that is
    p (1 + (p - 1) / (p v)) micro-batches' worth of 1/v-sized chunks."""
    pp, m, v = 4, 8, 2
    results, _ = run_pipeline(pp, "interleaved", m, virtual_stages=v)
    peaks = [r["run"].peak_in_flight for r in results]
    assert peaks == [min(2 * (pp - r - 1) + (v - 1) * pp + 1, m * v) for r in range(pp)]
    assert peaks[0] / v == pytest.approx(pp * first_stage_activation_factor(pp, v))


# -- lab09.3: the simulator, on GPipe and on lists built in this file ----------------------------
@pytest.mark.lab09
@pytest.mark.task("lab09.3")
@pytest.mark.parametrize(
    ("pp", "m", "tf", "tb"), [(4, 8, 1.0, 2.0), (2, 3, 1.5, 2.5), (8, 4, 1.0, 1.0)]
)
def test_gpipe_makespan_is_the_bubble_formula(pp, m, tf, tb):
    """Catches a clock that ignores a dependency (too short) or serialises the ranks (too
    long): GPipe takes (m + p - 1)(t_F + t_B); the idle share is (p - 1) / (m + p - 1) and
    idle over work (p - 1) / m; m micro-batches alive on every rank."""
    result = simulate(make_schedule("gpipe", pp, m), tf, tb)
    want = (m + pp - 1) * (tf + tb)
    assert result.makespan == pytest.approx(want), (
        f"GPipe, p = {pp}, m = {m}, t_F = {tf}, t_B = {tb}: makespan {result.makespan}, not "
        f"(m + p - 1)(t_F + t_B) = {want}: "
        + (
            "too short, an action started before its input arrived or its rank was free"
            if result.makespan < want
            else "too long, an action waited for more than its input and its rank"
        )
    )
    assert result.bubble == pytest.approx(bubble_share(pp, m))
    assert result.idle_over_ideal == pytest.approx(bubble_fraction(pp, m))
    assert result.peak_in_flight == [m] * pp, (
        f"GPipe keeps all m = {m} micro-batches alive on every rank, measured "
        f"{result.peak_in_flight}: an activation lives from the end of its F to the end of its B"
    )


@pytest.mark.lab09
@pytest.mark.task("lab09.3")
@pytest.mark.parametrize(("pp", "m"), [(4, 8), (4, 2), (3, 7)])
def test_1f1b_makespan_and_peak_in_the_simulator(pp, m):
    """Catches a simulator that frees activations at the wrong action: on stored 1F1B lists,
    the makespan is GPipe's and min(p - r, m) micro-batches are alive on rank r."""
    result = simulate(one_f_one_b(pp, m))
    assert result.makespan == pytest.approx(3 * (m + pp - 1))
    assert result.peak_in_flight == [min(pp - r, m) for r in range(pp)]


@pytest.mark.lab09
@pytest.mark.task("lab09.3")
@pytest.mark.parametrize(("pp", "m", "v"), [(4, 8, 2), (2, 4, 2), (4, 8, 4), (2, 2, 3)])
def test_interleaved_makespan_in_the_simulator(pp, m, v):
    """Catches chunks that take the whole t_F (not t_F / v) or a wrong stage of a chunk (c p + r):
    Megatron's lists take m (t_F + t_B) + (p - 1)(t_F + t_B) / v, bubble (p - 1) / (v m)."""
    lists = megatron_interleaved(pp, m, v)
    result = simulate(Schedule("interleaved", pp, m, v, lists))
    assert result.makespan == pytest.approx(3 * m + 3 * (pp - 1) / v)
    assert result.idle_over_ideal == pytest.approx(bubble_fraction(pp, m, v))


@pytest.mark.lab09
@pytest.mark.task("lab09.3")
def test_simulator_times_each_action():
    """Catches a start that waits for the wrong stage: two ranks, one micro-batch, every start
    and end on the clock; and W, when present, takes t_weight out of t_backward."""
    s = Schedule("gpipe", 2, 1, 1, [[Action("F", 0), Action("B", 0)]] * 2)
    events = {(r, repr(a)): (start, end) for r, a, start, end in simulate(s, 1.0, 2.0).events}
    for (rank, action), need in (((1, "F0"), (0, "F0")), ((0, "B0"), (1, "B0"))):
        assert events[rank, action][0] >= events[need][1], (
            f"rank {rank}'s {action} starts at {events[rank, action][0]}, before its input "
            f"arrived (rank {need[0]}'s {need[1]} ends at {events[need][1]}): an action starts "
            "when its rank is free and its input is there, the later of the two"
        )
    assert events == {(0, "F0"): (0, 1), (1, "F0"): (1, 2), (1, "B0"): (2, 4), (0, "B0"): (4, 6)}
    w = Schedule("zb", 2, 1, 1, [[Action("F", 0), Action("B", 0), Action("W", 0)]] * 2)
    result = simulate(w, 1.0, 2.0, t_weight=0.5)
    ends = {(r, repr(a)): end for r, a, _, end in result.events}
    assert ends == {
        (0, "F0"): 1,
        (1, "F0"): 2,
        (1, "B0"): 3.5,
        (1, "W0"): 4,
        (0, "B0"): 5,
        (0, "W0"): 5.5,
    }


@pytest.mark.lab09
@pytest.mark.task("lab09.3")
def test_simulator_reports_a_deadlock():
    """Catches a simulator that loops forever (or silently skips an action) when the lists wait
    on each other: rank 0 wants B0 before F1, rank 1 wants B1 before F0."""
    lists = [
        [Action("F", 0), Action("B", 0), Action("F", 1), Action("B", 1)],
        [Action("F", 1), Action("B", 1), Action("F", 0), Action("B", 0)],
    ]
    with pytest.raises(ScheduleDeadlock, match="deadlock"):
        simulate(Schedule("custom", 2, 2, 1, lists))


# -- lab09.4 (optional): zero-bubble H1 ---------------------------------------------------------
@pytest.mark.lab09
@pytest.mark.task("lab09.4")
@pytest.mark.parametrize(
    ("pp", "m", "tf", "tb", "tw"),
    [(4, 8, 1, 2, 1), (2, 4, 1, 2, 1), (4, 4, 1, 3, 1), (8, 16, 2, 3, 1)],
)
def test_zb_h1_makespan_and_memory(pp, m, tf, tb, tw):
    """Catches W passes that are not moved into the drain (then the step is 1F1B's) or moved so
    early that memory grows: makespan m (t_F + t_B) + (p - 1)(t_F + t_B - 2 t_W) (Qi et al.
    2023's (p - 1)(T_F + T_B - T_W) with T_B the input-gradient part), at most p alive."""
    result = simulate(make_schedule("zb-h1", pp, m), tf, tb, tw)
    assert max(result.peak_in_flight) <= pp, (
        f"p = {pp}, m = {m}: {result.peak_in_flight} micro-batches alive per rank, more than "
        "p: a micro-batch's activations live until its W, so the held-back W passes must run "
        "one after each B from the r-th on, not all at the end"
    )
    want = m * (tf + tb) + (pp - 1) * (tf + tb - 2 * tw)
    assert result.makespan == pytest.approx(want), (
        f"the step takes {result.makespan}, not {want} (1F1B's: {(m + pp - 1) * (tf + tb)}): "
        "ZB-H1 fills the drain's bubble only if rank r's first r W passes are delayed"
    )


@pytest.mark.lab09
@pytest.mark.task("lab09.4")
@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 5)])
def test_zb_h1_matches_one_process(pp, m):
    """Catches a weight gradient computed twice or never: the split backward gives one
    process's gradients and weights in fp64."""
    compare_with_reference(pp, "zb-h1", m, steps=2)


@pytest.mark.lab09
@pytest.mark.task("lab09.3")
@pytest.mark.parametrize(
    ("pp", "m", "tf", "tb", "tw"),
    [(4, 8, 1, 2, 1), (2, 4, 1, 2, 1), (4, 12, 1, 1.5, 0.5), (8, 20, 1, 2, 1)],
)
def test_simulator_runs_dualpipev(pp, m, tf, tb, tw):
    """lab09.3. Catches a simulator that assumes the interleaved placement (chunk c of rank r is
    stage c p + r) instead of asking the schedule: DualPipeV's chunks sit in a V (rank r holds
    stages r and 2p - 1 - r). Then every rank idles (p - 1)(t_F + t_B - 2 t_W) / 2 -- half of
    ZB-H1's, as chunks are half a rank's layers -- and keeps 2p + 1 chunk-micro-batches alive."""
    result = simulate(make_schedule("dualpipev", pp, m), tf, tb, tw)
    idle = (pp - 1) * (tf + tb - 2 * tw) / 2
    assert result.makespan == pytest.approx(m * (tf + tb) + idle)
    assert [result.makespan - b for b in result.busy] == pytest.approx([idle] * pp)
    assert result.peak_in_flight == [2 * pp + 1] * pp


def test_dualpipev_lists():
    """DualPipeV's lists: both chunks, every F/B/W once; stages in a V; simulated only."""
    s = make_schedule("dualpipev", 4, 8)
    assert s.virtual_stages == 2 and s.layout == "v"
    assert [s.stage(r, c) for c in (0, 1) for r in range(4)] == [0, 1, 2, 3, 7, 6, 5, 4]
    assert all(s.rank_of(s.stage(r, c)) == (r, c) for r in range(4) for c in (0, 1))
    # the last rank turns micro-batches around: F0.0 then F0.1 (stage 3 then stage 4)
    assert s.actions[3][:2] == [Action("F", 0, 0), Action("F", 0, 1)]
    with pytest.raises(ValueError, match=r"micro_batches >= 2\*pp = 8"):
        make_schedule("dualpipev", 4, 6)
    with pytest.raises(ValueError, match="simulate it"):
        run_schedule(s, None, [None] * 8)


# -- bad input and closed forms (not graded) ----------------------------------------------------
def test_bad_input_names_the_constraint():
    with pytest.raises(ValueError, match="micro_batches=6 is not divisible by pp=4"):
        make_schedule("interleaved", 4, 6, 2)
    with pytest.raises(ValueError, match=r"layers=2 < pp\*virtual_stages=4"):
        build_stage(Llama(TINY), 0, 2, 2)
    with pytest.raises(ValueError, match=r"layers=2 < pp\*virtual_stages=4"):
        build_stage(Llama(TINY), 0, 4)
    with pytest.raises(ValueError, match="virtual_stages=2 needs kind='interleaved'"):
        make_schedule("1f1b", 2, 4, 2)
    with pytest.raises(ValueError, match="kind must be one of"):
        make_schedule("pipedream", 2, 4)
    with pytest.raises(ValueError, match="t_weight"):
        simulate(make_schedule("gpipe", 2, 2), 1.0, 2.0, t_weight=3.0)


def test_closed_forms():
    assert bubble_fraction(4, 8) == 3 / 8 and bubble_fraction(4, 8, 2) == 3 / 16
    assert bubble_share(4, 8) == 3 / 11 and bubble_share(4, 8, 2) == 3 / 19
    assert first_stage_activation_factor(4, 2) == 1 + 3 / 8
    assert p2p_bytes(micro_batch=1, seq_len=4096, hidden=8192) == 4096 * 8192 * 2
    assert p2p_bytes(micro_batch=2, seq_len=4096, hidden=8192, tp=8, sp=True) == 2 * 512 * 8192 * 2
    sg = dict(micro_batch=2, seq_len=4096, hidden=8192, tp=8, scatter_gather=True)
    assert p2p_bytes(**sg) == p2p_bytes(**sg, sp=True) == 2 * 512 * 8192 * 2
    with pytest.raises(ValueError, match="seq_len=10 is not divisible by tp=4"):
        p2p_bytes(micro_batch=1, seq_len=10, hidden=8, tp=4, sp=True)
