"""Enumerate every configuration, keep those that fit, rank them by predicted step time.

A *layout* is ``(tp, pp, cp, dp, v, ep, micro_batch)``; on each valid layout the planner tries
every setting of the knobs that change memory against time: sequence parallelism, ZeRO stage,
recomputation and offload (ZeRO only with dp x cp > 1: with one rank per weight there is nothing
to shard, and stages 1-3 would be the same configuration as stage 0 under another name). A layout that breaks a rule (:func:`~.config.validate`) is one
rejected row with the rule's message; a configuration that does not fit is rejected with its
bytes. The fitting ones are ranked by predicted step time, ties broken by the configuration's
fields, so the order is the same on every machine.

``critical_batch`` flags (``Row.warning``) the fitting rows whose global batch ``d m b``
sequences exceeds a batch the user sets: past the critical batch, more sequences per step buy
few fewer steps, so the extra data parallelism costs tokens (McCandlish et al. 2018, section
2.3). ``overlap`` hides each axis's traffic in its chapter's window, under its chapter's
condition (:func:`~.cost.step_time`, :mod:`.overlap`). ``reshard`` and ``hsdp_sync`` try ZeRO-3's
resharding policies and HSDP's two syncs besides the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

from minitorch_dist.checks import check_int
from minitorch_dist.memory import format_bytes
from minitorch_dist.progress import progress

from .config import RECOMPUTE, ParallelConfig, micro_batches, validate
from .cost import StepTime, step_time
from .fit import peak_memory
from .model import as_model
from .overlap import Overlap, as_overlap
from .roofline import Phase, roofline

__all__ = [
    "Choice",
    "Plan",
    "Row",
    "batch_warning",
    "choose",
    "divisors",
    "layouts",
    "plan",
    "rank",
]

MICRO_BATCHES = (1, 2, 4, 8)
VIRTUAL = (1, 2, 4)


@dataclass(frozen=True)
class Row:
    """One configuration: its peak bytes per rank, predicted step time, or why it is rejected."""

    config: ParallelConfig
    memory: dict[str, int] | None = None  # peak_memory(...); None when the layout is invalid
    time: StepTime | None = None  # step_time(...); None unless it fits
    reason: str = ""  # empty when it fits
    warning: str = ""  # set when the global batch d m b exceeds the critical batch

    @property
    def fits(self) -> bool:
        return not self.reason


@dataclass
class Plan:
    """Every configuration of one problem: ``rows`` ranked (fitting first, fastest first)."""

    model: object
    cluster: object
    global_batch: int
    seq_len: int
    rows: list[Row] = field(default_factory=list)

    @property
    def fitting(self) -> list[Row]:
        return [r for r in self.rows if r.fits]

    @property
    def rejected(self) -> list[Row]:
        return [r for r in self.rows if not r.fits]

    @property
    def best(self) -> ParallelConfig:
        fitting = self.fitting
        if not fitting:
            raise ValueError("no configuration fits: every row is rejected (see .rejected)")
        return fitting[0].config

    def rank_of(self, config: ParallelConfig) -> int | None:
        """1-based rank of ``config`` among the fitting ones (None if it does not fit)."""
        for i, row in enumerate(self.fitting, 1):
            if row.config == config:
                return i
        return None

    def roofline(self, config: ParallelConfig, *, overlap: bool = False) -> list[Phase]:
        """``config``'s phases on this problem, each with the resource that bounds it and how
        far the step time puts it from its roof (:func:`~.roofline.roofline`)."""
        kw = {"global_batch": self.global_batch, "seq_len": self.seq_len}
        return roofline(self.model, self.cluster, config, **kw, overlap=overlap)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def layouts(model, cluster, global_batch: int) -> list[tuple[int, ...]]:  # noqa: ANN001
    """Every ``(tp, pp, cp, dp, v, ep, micro_batch)`` whose product of the first four is the
    cluster's GPUs (validity is checked later, so invalid ones get their reason)."""
    n = cluster.gpus
    experts = model.moe.experts if model.moe is not None else 1
    out = []
    for tp, pp in product(divisors(n), divisors(n)):
        if n % (tp * pp):
            continue
        for cp in divisors(n // (tp * pp)):
            dp = n // (tp * pp * cp)
            for v, mb in product(VIRTUAL if pp > 1 else (1,), MICRO_BATCHES):
                for ep in (e for e in divisors(dp) if experts % e == 0) if experts > 1 else (1,):
                    out.append((tp, pp, cp, dp, v, ep, mb))
    return out


def rank(rows: list[Row]) -> list[Row]:
    """Fitting rows by predicted step time (ties: fewer bytes, then the configuration's fields), then rejected
    rows by their configuration's fields: a deterministic order."""
    # BEGIN SOLUTION lab12.2: rank by predicted step time, deterministic ties, rejected last
    fitting = sorted(
        (r for r in rows if r.fits), key=lambda r: (r.time.total, r.memory["total"], r.config.key())
    )
    rejected = sorted((r for r in rows if not r.fits), key=lambda r: r.config.key())
    return fitting + rejected
    # END SOLUTION


def batch_warning(config: ParallelConfig, global_batch: int, critical_batch: int | None) -> str:
    """The warning of a configuration whose global batch ``d m b`` (sequences) exceeds
    ``critical_batch``; empty when it does not, or when ``critical_batch`` is None."""
    if critical_batch is None:
        return ""
    check_int("critical_batch", critical_batch)
    c = config
    m = micro_batches(c, global_batch)
    sequences = c.dp * m * c.micro_batch
    if sequences <= critical_batch:
        return ""
    return (
        f"d*m*b = {c.dp}*{m}*{c.micro_batch} = {sequences} sequences > critical_batch="
        f"{critical_batch}: past the critical batch, more sequences per step buy few fewer "
        "steps (McCandlish et al. 2018)"
    )


def plan(
    model,
    cluster,
    *,
    global_batch: int,
    seq_len: int,
    only: dict | None = None,  # noqa: ANN001
    activations: str = "korthikanti",
    critical_batch: int | None = None,
    overlap: bool | Overlap = False,
    shard_groups: tuple[int, ...] = (),
    reshard: tuple[str, ...] = ("after_forward",),
    hsdp_sync: tuple[str, ...] = ("step",),
) -> Plan:
    """Every configuration of ``model`` on ``cluster`` for ``global_batch`` sequences of
    ``seq_len`` tokens: fits or the reason it does not, predicted step time and MFU, ranked.
    ``only``: keep just the configurations whose fields have these values. ``activations``:
    the fit test's count, Korthikanti's (the default) or ``"exact"`` (:mod:`.exact`).
    ``critical_batch``: flag the fitting rows whose ``d m b`` exceeds it (``Row.warning``).
    ``overlap``: the cost model's overlap switch (:func:`~.cost.step_time`; off by default).
    ``shard_groups``: HSDP shard-group sizes to try besides the whole dp group (ZeRO >= 1, a
    size that divides dp, no expert parallelism); empty by default (plain ZeRO only).
    ``reshard``: ZeRO-3's resharding policies to try (:data:`~.config.RESHARD`); ``hsdp_sync``:
    HSDP's replica all-reduce to try, ``"step"`` (deferred), ``"micro_batch"`` or both."""
    as_overlap(overlap)  # refuses a bad value before the search
    only = only or {}
    model = as_model(model)
    kw = {"global_batch": global_batch, "seq_len": seq_len}
    rows = []
    todo = layouts(model, cluster, global_batch)
    for tp, pp, cp, dp, v, ep, mb in progress(todo, desc="planner: layouts"):
        layout = {"dp": dp, "tp": tp, "pp": pp, "v": v, "cp": cp, "ep": ep, "micro_batch": mb}
        if any(layout[k] != only[k] for k in only.keys() & layout.keys()):
            continue
        base = ParallelConfig(**layout)
        try:
            validate(model, cluster, base, **kw)
        except ValueError as e:
            rows.append(Row(base, reason=str(e)))
            continue
        groups = [0] + [g for g in shard_groups if 1 < g < dp and dp % g == 0 and ep == 1]
        for sp, zero, recompute, offload, group in product(
            (False, True) if tp > 1 else (False,),
            (0, 1, 2, 3) if dp * cp > 1 else (0,),
            RECOMPUTE,
            (False, True),
            groups,
        ):
            if group and not zero:
                continue  # HSDP shards states: with ZeRO 0 there is no shard group
            knobs = {
                "sp": sp,
                "zero": zero,
                "recompute": recompute,
                "offload": offload,
                "shard_group": group,
            }
            if any(knobs[k] != only[k] for k in only.keys() & knobs.keys()):
                continue
            for policy in _policies(knobs, reshard, hsdp_sync, only):
                rows.append(_row(model, cluster, ParallelConfig(**layout, **knobs, **policy),
                                 kw, activations, overlap, critical_batch))  # fmt: skip
    return Plan(model, cluster, global_batch, seq_len, rank(rows))


def _policies(knobs: dict, reshard: tuple, hsdp_sync: tuple, only: dict) -> list[dict]:
    """The ZeRO-3 resharding and HSDP sync settings to try with ``knobs`` (the valid ones)."""
    out = []
    for policy, sync in product(reshard if knobs["zero"] == 3 else ("after_forward",),
                                hsdp_sync if knobs["shard_group"] else ("step",)):  # fmt: skip
        every = knobs["zero"] == 2 or (knobs["zero"] == 3 and policy != "after_step_no_sync")
        if sync == "micro_batch" and not every:
            continue  # one reduce-scatter per step: nothing to all-reduce per micro-batch
        choice = {"reshard": policy, "hsdp_sync": sync}
        if all(choice[k] == only[k] for k in only.keys() & choice.keys()):
            out.append(choice)
    return out


def _row(model, cluster, config: ParallelConfig, kw: dict, activations: str, overlap,
         critical_batch: int | None) -> Row:  # noqa: ANN001  # fmt: skip
    """One configuration's row: its reason, or its bytes, step time and warning."""
    seq_len, cp, tp, sp = kw["seq_len"], config.cp, config.tp, config.sp
    if sp and (seq_len // cp) % tp:
        return Row(config, reason=f"seq_len/cp = {seq_len // cp} is not divisible by tp={tp} (sp)")
    memory = peak_memory(model, config, **kw, activations=activations)
    if memory["total"] > cluster.memory_bytes:
        reason = (
            f"needs {format_bytes(memory['total'])} per rank > {format_bytes(cluster.memory_bytes)}"
        )
        return Row(config, memory, reason=reason)
    time = step_time(model, cluster, config, **kw, overlap=overlap)
    warning = batch_warning(config, kw["global_batch"], critical_batch)
    return Row(config, memory, time, warning=warning)


@dataclass(frozen=True)
class Choice:
    """The chosen configuration and the numbers that defend it."""

    config: ParallelConfig  # the best-ranked configuration that fits
    time: StepTime  # its predicted step time, by part
    memory: dict[str, int]  # its peak bytes per rank
    runner_up: ParallelConfig | None  # the next-best configuration
    margin: float  # runner-up's step time over the chosen one's (>= 1)
    fitting: int  # how many configurations fit
    bottleneck: str  # the largest part of the step after compute
    warning: str = ""  # the chosen row's critical-batch warning, if any


def choose(
    model,
    cluster,
    *,
    global_batch: int,
    seq_len: int,
    critical_batch: int | None = None,
    overlap: bool | Overlap = False,  # noqa: ANN001
) -> Choice:
    """Plan the problem and return a :class:`Choice`: the first fitting row's configuration,
    time and memory; the second row's configuration and its step time over the first's
    (``margin``, ``inf`` without a second); how many fit; and ``bottleneck``, the largest of the
    first row's ``tp``, ``cp``, ``ep``, ``pp``, ``bubble``, ``dp``, ``offload`` (ties: the first
    name in alphabetical order); ``warning``, the first row's critical-batch warning
    (``critical_batch``, as :func:`plan`). ``overlap``: :func:`plan`'s switch. ValueError when
    nothing fits."""
    # BEGIN SOLUTION lab12.2: plan, then the best row, the runner-up's margin, the largest overhead
    result = plan(
        model,
        cluster,
        global_batch=global_batch,
        seq_len=seq_len,
        critical_batch=critical_batch,
        overlap=overlap,
    )
    fitting = result.fitting
    if not fitting:
        raise ValueError("no configuration fits this model on this cluster")
    best = fitting[0]
    second = fitting[1] if len(fitting) > 1 else None
    parts = {k: getattr(best.time, k) for k in ("tp", "cp", "ep", "pp", "bubble", "dp", "offload")}
    return Choice(
        config=best.config,
        time=best.time,
        memory=best.memory,
        runner_up=second.config if second else None,
        margin=second.time.total / best.time.total if second else float("inf"),
        fitting=len(fitting),
        bottleneck=max(sorted(parts), key=parts.__getitem__),
        warning=best.warning,
    )
    # END SOLUTION
