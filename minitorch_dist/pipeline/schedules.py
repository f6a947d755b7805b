"""Pipeline schedules as data: per rank, the list of actions it runs, in order.

    s = make_schedule("1f1b", pp=4, micro_batches=8)
    s.actions[0]      # [F0, F1, F2, F3, B0, F4, B1, F5, B2, F6, B3, F7, B4, B5, B6, B7]

An :class:`Action` is ``F`` (forward of one micro-batch through one chunk of layers), ``B``
(its backward) or, in the zero-bubble schedules, ``B`` split in two: ``B`` the gradient with
respect to the input (what the previous stage waits for) and ``W`` the gradients of the weights
(which nobody waits for). The same lists drive the runtime (:func:`run_schedule`), which
sends and receives what each action needs, and the simulator (:func:`simulate`), which times
them on a logical clock. A schedule is only an order: where the data goes follows from the
stage each action runs on.

Stages: with ``v`` virtual stages (chunks) per rank, the model is cut into ``p v`` chunks and
rank ``r`` holds chunks ``r, r + p, r + 2p, ...`` (Narayanan et al. 2021, section 2.2.2): chunk
``c`` of rank ``r`` is global stage ``c p + r``. Activations go from stage ``s`` to ``s + 1``,
that is from rank ``r`` to rank ``(r + 1) % p``, wrapping from the last rank to the first
between chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

from minitorch_dist.checks import check_choice, check_divisible, check_int

__all__ = ["KINDS", "OPS", "Action", "Schedule", "check_schedule", "make_schedule"]

KINDS = ("gpipe", "1f1b", "interleaved", "zb-h1", "dualpipev")
OPS = ("F", "B", "W")


@dataclass(frozen=True, order=True)
class Action:
    """One unit of work on one rank: ``op`` ("F", "B" or "W") for ``micro_batch`` through the
    rank's ``chunk`` (0 unless interleaved)."""

    op: str
    micro_batch: int
    chunk: int = 0

    def __repr__(self) -> str:
        return f"{self.op}{self.micro_batch}" + (f".{self.chunk}" if self.chunk else "")


@dataclass
class Schedule:
    """Per-rank action lists: ``actions[r]`` is what rank ``r`` runs, in order."""

    kind: str
    pp: int
    micro_batches: int
    virtual_stages: int
    actions: list[list[Action]]
    layout: str = "loop"  # "loop": chunk c of rank r is stage c p + r; "v": r and 2p - 1 - r

    @property
    def num_stages(self) -> int:
        """Global stages: ``p v`` chunks of the model."""
        return self.pp * self.virtual_stages

    def stage(self, rank: int, chunk: int) -> int:
        """The global stage of ``rank``'s ``chunk``: ``chunk * pp + rank`` (a loop through the
        ranks, once per chunk); in DualPipeV's V, ``rank`` for chunk 0 and ``2 pp - 1 - rank``
        for chunk 1 (down the ranks and back up)."""
        if self.layout == "v":
            return rank if chunk == 0 else 2 * self.pp - 1 - rank
        return chunk * self.pp + rank

    def rank_of(self, stage: int) -> tuple[int, int]:
        """``(rank, chunk)`` holding global stage ``stage``."""
        if self.layout == "v":
            return (stage, 0) if stage < self.pp else (2 * self.pp - 1 - stage, 1)
        return stage % self.pp, stage // self.pp

    def __repr__(self) -> str:
        rows = "\n".join(
            f"  rank {r}: {' '.join(map(repr, a))}" for r, a in enumerate(self.actions)
        )
        return (
            f"Schedule({self.kind!r}, pp={self.pp}, micro_batches={self.micro_batches}, "
            f"virtual_stages={self.virtual_stages})\n{rows}"
        )


def make_schedule(kind: str, pp: int, micro_batches: int, virtual_stages: int = 1) -> Schedule:
    """The action lists of schedule ``kind`` for ``pp`` ranks and ``micro_batches`` micro-batches.

    * ``"gpipe"``: all forward passes, then all backward passes (Huang et al. 2019);
    * ``"1f1b"``: ``p - r - 1`` warm-up forwards on rank ``r``, then one forward and one
      backward in turn, then the remaining backwards (Narayanan et al. 2021, section 2.2.1);
    * ``"interleaved"``: Megatron-LM's interleaved 1F1B over ``virtual_stages`` chunks per rank
      (Narayanan et al. 2021, section 2.2.2); needs ``micro_batches % pp == 0``;
    * ``"zb-h1"``: 1F1B with the backward split into B (input gradient) and W (weight
      gradient), the W passes moved into the drain's bubbles (Qi et al. 2024, section 2.1);
    * ``"dualpipev"``: DeepSeek's DualPipeV, the "cut-in-half" DualPipe (DeepSeek-AI 2024,
      section 3.2.1; the DualPipe repository's ``dualpipev.py``): the model in ``2 pp`` chunks,
      rank ``r`` holding chunks ``r`` and ``2 pp - 1 - r`` (a V), so micro-batches flow down the
      ranks and back up; split backward with W passes filling the bubbles. Needs
      ``micro_batches >= 2 pp``. Simulated only: DualPipe overlaps a forward chunk with a
      backward chunk of the other direction (communication hidden behind compute); the logical
      clock runs the pair one after the other, which is the same when communication is free.

    Bad input raises a ValueError naming the constraint.
    """
    check_choice("kind", kind, KINDS)
    check_int("pp", pp)
    check_int("micro_batches", micro_batches)
    check_int("virtual_stages", virtual_stages)
    if kind == "dualpipev":
        if virtual_stages not in (1, 2):
            raise ValueError(
                f"dualpipev has 2 chunks per rank, got virtual_stages={virtual_stages}"
            )
        if micro_batches < 2 * pp:
            raise ValueError(
                f"dualpipev needs micro_batches >= 2*pp = {2 * pp}, got {micro_batches}"
            )
        virtual_stages = 2
    elif kind != "interleaved" and virtual_stages != 1:
        raise ValueError(f"virtual_stages={virtual_stages} needs kind='interleaved', got {kind!r}")
    if kind == "interleaved":
        check_divisible("micro_batches", micro_batches, "pp", pp)
    build = {
        "gpipe": _gpipe,
        "1f1b": _one_f_one_b,
        "interleaved": _interleaved,
        "zb-h1": _zb_h1,
        "dualpipev": _dualpipev,
    }[kind]
    actions = [build(rank, pp, micro_batches, virtual_stages) for rank in range(pp)]
    layout = "v" if kind == "dualpipev" else "loop"
    schedule = Schedule(kind, pp, micro_batches, virtual_stages, actions, layout)
    check_schedule(schedule)
    return schedule


def _gpipe(rank: int, pp: int, m: int, v: int) -> list[Action]:
    """GPipe (given): every forward, then every backward, micro-batches in order."""
    return [Action("F", i) for i in range(m)] + [Action("B", i) for i in range(m)]


def _one_f_one_b(rank: int, pp: int, m: int, v: int) -> list[Action]:
    """1F1B on ``rank``: warm-up forwards, steady one-forward-one-backward, drain."""
    # BEGIN SOLUTION lab09.2: 1F1B: min(p - r - 1, m) warm-up forwards, then F/B pairs, then the rest
    warmup = min(pp - rank - 1, m)
    actions = [Action("F", i) for i in range(warmup)]
    for i in range(m - warmup):
        actions += [Action("F", warmup + i), Action("B", i)]
    actions += [Action("B", i) for i in range(m - warmup, m)]
    return actions
    # END SOLUTION


def _interleaved(rank: int, pp: int, m: int, v: int) -> list[Action]:
    """Megatron's interleaved 1F1B on ``rank``: the ``m v`` chunk-micro-batches in groups of
    ``pp`` micro-batches per chunk, forward chunks in order and backward chunks reversed;
    ``2 (p - r - 1) + (v - 1) p`` warm-up forwards (capped at ``m v``), then F/B pairs."""
    # BEGIN SOLUTION lab09.2: interleaved 1F1B: Megatron's order of (micro-batch, chunk) and warm-up
    total = m * v

    def unit(k: int, backward: bool) -> tuple[int, int]:
        group, within = divmod(k, pp * v)  # groups of pp micro-batches through all v chunks
        chunk = within // pp
        return group * pp + within % pp, (v - 1 - chunk) if backward else chunk

    warmup = min((pp - rank - 1) * 2 + (v - 1) * pp, total)
    actions = [Action("F", *unit(k, False)) for k in range(warmup)]
    for i in range(total - warmup):
        actions += [Action("F", *unit(warmup + i, False)), Action("B", *unit(i, True))]
    actions += [Action("B", *unit(k, True)) for k in range(total - warmup, total)]
    return actions
    # END SOLUTION


def _zb_h1(rank: int, pp: int, m: int, v: int) -> list[Action]:
    """ZB-H1 on ``rank`` (optional task): 1F1B's order of F and B; rank ``r`` holds back its
    first ``r`` W passes (the later a stage, the longer its drain waits for gradients) and
    runs one after each B from then on, the rest at the end. With ``t_F = t_B = t_W`` and
    ``m >= p`` the step takes ``3 m + p - 1`` units against 1F1B's ``3 (m + p - 1)``
    (Qi et al. 2024, section 2.1: bubble ``(p - 1)(t_F + t_B - t_W)``), with at most ``p``
    micro-batches alive on every rank, 1F1B's first-stage peak."""
    # BEGIN SOLUTION lab09.4: ZB-H1: 1F1B's F and B; rank r delays its first r W passes
    warmup = min(pp - rank - 1, m)
    actions = [Action("F", i) for i in range(warmup)]
    w = 0  # the next W to run
    for i in range(m):
        if warmup + i < m:
            actions.append(Action("F", warmup + i))
        actions.append(Action("B", i))
        if i - w >= rank or warmup + i >= m:  # r W passes held back, none in the drain
            actions.append(Action("W", w))
            w += 1
    return actions + [Action("W", j) for j in range(w, m)]
    # END SOLUTION


def _dualpipev(rank: int, pp: int, m: int, v: int) -> list[Action]:
    """DualPipeV on ``rank`` (given), in the eight steps of DeepSeek's ``dualpipev.py``. Chunk 0
    carries micro-batches down the ranks, chunk 1 back up; each chunk runs its micro-batches in
    order. A zero-bubble backward (B) queues its W; a plain one is B then W at once; a W step
    runs the oldest queued W. The steps' counts are the reference implementation's."""
    actions: list[Action] = []
    nxt = {("F", 0): 0, ("F", 1): 0, ("B", 0): 0, ("B", 1): 0}
    queue: list[Action] = []

    def run(op: str, chunk: int, zero_bubble: bool = False) -> None:
        i = nxt[(op, chunk)]
        nxt[(op, chunk)] += 1
        actions.append(Action(op, i, chunk))
        if op == "B":
            (queue.append if zero_bubble else actions.append)(Action("W", i, chunk))

    def weight() -> None:
        actions.append(queue.pop(0))

    last = pp - 1
    for _ in range((pp - rank - 1) * 2):  # 1: forwards of chunk 0
        run("F", 0)
    for _ in range(rank + 1):  # 2: chunk 0 and chunk 1 forwards in turn
        run("F", 0)
        run("F", 1)
    for _ in range(pp - rank - 1):  # 3: B, W and F of chunk 1 (zero bubble)
        run("B", 1, zero_bubble=True)
        weight()
        run("F", 1)
    for _ in range(m - 2 * pp + rank + 1):  # 4: F0 with B1, then F1 with B0 (overlapped pairs)
        run("F", 0)
        run("B", 1)
        run("F", 1)
        run("B", 0)
    for _ in range(pp - rank - 1):  # 5: B1, then F1 with B0
        run("B", 1)
        run("F", 1)
        run("B", 0)
    zero_bubble = False
    for i in range(rank + 1):  # 6: B1 and B0, the second half zero bubble
        if i == (rank + 1) // 2 and rank % 2 == 1:
            zero_bubble = True
        run("B", 1, zero_bubble)
        if i == (rank + 1) // 2 and rank % 2 == 0:
            zero_bubble = True
        run("B", 0, zero_bubble)
    for _ in range(pp - rank - 1):  # 7: a queued W, then B0 (zero bubble)
        weight()
        run("B", 0, zero_bubble=True)
    while queue:  # 8: the remaining W passes
        weight()
    assert rank <= last and all(n == m for n in nxt.values()), nxt
    return actions


def check_schedule(schedule: Schedule) -> None:
    """Every rank runs F and B (and W, if any) exactly once per micro-batch and chunk, B after
    F and W after B; a ValueError names the first rank that does not."""
    m, v = schedule.micro_batches, schedule.virtual_stages
    if len(schedule.actions) != schedule.pp:
        raise ValueError(f"{len(schedule.actions)} action lists for pp={schedule.pp} ranks")
    for rank, actions in enumerate(schedule.actions):
        ops = {a.op for a in actions}
        want = {
            Action(op, i, c)
            for op in ("F", "B") + (("W",) if "W" in ops else ())
            for i in range(m)
            for c in range(v)
        }
        if len(actions) != len(set(actions)) or set(actions) != want:
            missing, extra = sorted(want - set(actions)), sorted(set(actions) - want)
            raise ValueError(
                f"rank {rank}: each F/B{'/W' if 'W' in ops else ''} must appear "
                f"once per micro-batch and chunk (missing {missing}, "
                f"unexpected {extra})"
            )
        where = {a: i for i, a in enumerate(actions)}
        for a in actions:
            before = {"B": "F", "W": "B"}.get(a.op)
            if before and where[Action(before, a.micro_batch, a.chunk)] > where[a]:
                raise ValueError(f"rank {rank}: {a} comes before {before}{a.micro_batch}")
