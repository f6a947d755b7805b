"""The one function behind the book's live widgets: :func:`live_result`, run by Python and by the page.

Chapter 1's memory predictor and chapter 12's planner answer in the reader's browser with the
package's own Python: Pyodide (CPython in WebAssembly, vendored by :mod:`minitorch_dist.vendor`)
loads the torch-free arithmetic layer (:func:`minitorch_dist.arithmetic.arithmetic_files`) and
this module, and the page calls ``live_result(kind, inputs)`` whenever a control changes. The
page's element carries ``data-inputs`` (the controls' values) and ``data-result`` (this
function's answer, the JSON it shows), so a test compares the page with Python directly.

``kind`` is ``"predictor"`` (the notebook predictor's controls, :func:`~minitorch_dist.memory.predict`)
or ``"planner"`` (the notebook planner's controls: a model and a cluster preset, the batch and
every axis of the layout; :func:`~minitorch_dist.planner.plan`'s ranking). :func:`controls` lists
each control's label, choices and default. Bad input is not a crash: the result is
``{"kind": kind, "error": "<the ValueError's message>"}``. Standard library only at import: the
arithmetic is imported when a result is asked for.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from functools import cache, lru_cache
from typing import Any

__all__ = ["KINDS", "controls", "defaults", "live_result", "live_steps", "option_text"]

KINDS = ("predictor", "planner")
POWERS = tuple(2**k for k in range(15))  # 1 ... 16384, as the planner widget
MEMORY_PARTS = {
    "predictor": ("params", "grads", "optimizer", "activations"),
    "planner": ("params", "grads", "optimizer", "activations", "logits"),
}
TIME_PARTS = ("compute", "tp", "cp", "ep", "pp", "bubble", "dp", "offload")
TOP = 5  # the planner's top configurations shown
PLANS = 8  # problems whose ranking stays cached
_plans: OrderedDict[tuple, Any] = OrderedDict()  # problem -> Plan, most recent last
Control = tuple[str, tuple[Any, ...], Any]  # (label, choices, default)


@cache
def controls(kind: str) -> dict[str, Control]:
    """The controls of a widget: name -> (label, choices, default), the notebook widget's own
    (:class:`~minitorch_dist.viz.MemoryPredictor`, :class:`~minitorch_dist.viz.PlannerWidget`;
    free integers become their powers of two)."""
    from minitorch_dist.memory.estimate import RECIPES, RECOMPUTE
    from minitorch_dist.models.configs import preset_names

    if kind == "predictor":
        return {
            "preset": ("model", tuple(preset_names()), "llama-3-8b"),
            "seq_len": ("sequence length", tuple(2**k for k in range(7, 18)), 4096),
            "micro_batch": ("micro-batch", POWERS[:13], 1),
            "recompute": ("recompute", RECOMPUTE, "none"),
            "zero_stage": ("ZeRO stage", (0, 1, 2, 3), 0),
            "dp": ("dp ranks", POWERS[:11], 8),
            "recipe": ("recipe", RECIPES, "mixed"),
            "offload": ("offload optimizer states to CPU", (False, True), False),
            "device_gib": ("device GiB", (16, 24, 40, 48, 80, 94, 141, 192), 80),
        }
    if kind == "planner":
        from minitorch_dist.models.moe_configs import moe_preset_names
        from minitorch_dist.planner.cluster import CLUSTER_PRESETS

        return {
            "model": ("model", (*preset_names(), *moe_preset_names()), "llama-3-70b"),
            "cluster": ("cluster", tuple(CLUSTER_PRESETS), "dgx-h100"),
            "gpus": ("GPUs", POWERS[3:], 64),
            "seq_len": ("sequence", (*POWERS[7:], 2**17), 4096),
            "global_batch": ("global batch", POWERS, 256),
            "tp": ("tp", POWERS[:5], 8),
            "sp": ("sequence parallel", (False, True), True),
            "cp": ("cp", POWERS[:7], 1),
            "pp": ("pp", POWERS[:8], 4),
            "v": ("v (interleave)", (1, 2, 4), 1),
            "ep": ("ep", POWERS[:9], 1),
            "zero": ("ZeRO", (0, 1, 2, 3), 1),
            "recompute": ("recompute", RECOMPUTE, "selective"),
            "micro_batch": ("micro-batch", POWERS[:5], 1),
            "offload": ("offload optimizer", (False, True), False),
        }
    raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")


def option_text(value: Any) -> str:
    """What a control shows for one of its choices: its value. Only a yes/no control (a bool
    choice) shows "yes" or "no"; 0 and 1 are numbers (``True == 1`` in Python, so a lookup
    keyed by ``True`` would call 1 "yes"); integers get thousands separators ("16,384")."""
    if type(value) is bool:
        return "yes" if value else "no"
    if type(value) is int:
        return f"{value:,}"
    return str(value)


def defaults(kind: str) -> dict[str, Any]:
    """Every control of ``kind`` at its default value."""
    return {name: default for name, (_, _, default) in controls(kind).items()}


def _checked(kind: str, inputs: Any) -> dict[str, Any]:
    if not isinstance(inputs, dict):
        raise ValueError(f"inputs must be a dict of control values, got {type(inputs).__name__}")
    spec = controls(kind)
    unknown = sorted(set(inputs) - set(spec))
    if unknown:
        raise ValueError(f"unknown controls {unknown} for the {kind}; valid: {list(spec)}")
    values = defaults(kind)
    for name, value in inputs.items():
        choices = spec[name][1]
        # bool is an int in Python: True must not pass for 1, nor 1 for True
        if not any(value == c and type(value) is type(c) for c in choices):
            shown = ", ".join(map(str, choices))
            raise ValueError(f"control {name} must be one of {shown}; got {value!r}")
        values[name] = value
    return values


def _bars(nbytes: dict[str, int], parts: tuple[str, ...], scale: int) -> list[dict[str, Any]]:
    from minitorch_dist.memory.estimate import format_bytes

    return [
        {
            "part": p,
            "bytes": nbytes[p],
            "exact": f"{nbytes[p]:,}",
            "text": format_bytes(nbytes[p]),
            "width": f"{100 * nbytes[p] / (scale or 1):.2f}",
        }
        for p in parts
    ]


def _predictor(v: dict[str, Any]) -> dict[str, Any]:
    from minitorch_dist.memory.estimate import format_bytes
    from minitorch_dist.memory.prediction import predict

    knobs = {k: v[k] for k in v if k != "device_gib"}
    result = predict(**knobs)
    device = v["device_gib"] * 2**30
    parts = (*MEMORY_PARTS["predictor"], "total", *(("cpu",) if "cpu" in result else ()))
    fits = result["total"] <= device
    verdict = (
        f"{'fits' if fits else 'does NOT fit'} in {format_bytes(device)} per device "
        f"({100 * result['total'] / device:.0f}% of it), before temporary buffers and "
        "fragmentation"
    )
    return {
        "kind": "predictor",
        "bytes": dict(result),
        "device_bytes": device,
        "fits": fits,
        "rows": _bars(result, parts, max(result["total"], result.get("cpu", 0), device)),
        "verdict": verdict,
    }


def _plan_parts(
    model: str, cluster: str, gpus: int, global_batch: int, seq_len: int
) -> Iterator[tuple[int, int, int]]:
    """Rank a problem in parts, one ``(tp, pp)`` pair of :func:`~minitorch_dist.planner.layouts`
    at a time (``plan(..., only={"tp": tp, "pp": pp})``), yielding ``(parts done, parts,
    configurations so far)`` after each; the rows of every part, ranked by
    :func:`~minitorch_dist.planner.rank`, are :func:`~minitorch_dist.planner.plan`'s own (a test
    holds them equal), and the Plan is cached. Nothing is yielded for a cached problem."""
    from minitorch_dist.planner.cluster import Cluster
    from minitorch_dist.planner.model import as_model
    from minitorch_dist.planner.search import Plan, layouts, plan, rank

    problem = (model, cluster, gpus, global_batch, seq_len)
    if problem in _plans:
        _plans.move_to_end(problem)
        return
    arch, machines = as_model(model), Cluster.from_preset(cluster, gpus)
    kw = {"global_batch": global_batch, "seq_len": seq_len}
    pairs = list(dict.fromkeys((tp, pp) for tp, pp, *_ in layouts(arch, machines, global_batch)))
    rows: list = []
    for k, (tp, pp) in enumerate(pairs, 1):
        rows += plan(arch, machines, **kw, only={"tp": tp, "pp": pp}).rows
        yield k, len(pairs), len(rows)
    _plans[problem] = Plan(arch, machines, global_batch, seq_len, rank(rows))
    while len(_plans) > PLANS:
        _plans.popitem(last=False)


def _plan(model: str, cluster: str, gpus: int, global_batch: int, seq_len: int) -> Any:
    """The problem's :class:`~minitorch_dist.planner.Plan` (ranked by :func:`_plan_parts`)."""
    problem = (model, cluster, gpus, global_batch, seq_len)
    for _ in _plan_parts(*problem):
        pass
    return _plans[problem]


@lru_cache(maxsize=8)
def _ranks(model: str, cluster: str, gpus: int, global_batch: int, seq_len: int) -> dict:
    """``Plan.rank_of`` for every fitting configuration at once (a scan of every row per change
    is seconds in the page)."""
    ranks: dict = {}
    for i, row in enumerate(_plan(model, cluster, gpus, global_batch, seq_len).fitting, 1):
        ranks.setdefault(row.config, i)
    return ranks


def _problem(v: dict[str, Any]) -> tuple[str, str, int, int, int]:
    return v["model"], v["cluster"], v["gpus"], v["global_batch"], v["seq_len"]


def _planner(v: dict[str, Any]) -> dict[str, Any]:
    from minitorch_dist.memory.estimate import format_bytes
    from minitorch_dist.planner.config import ParallelConfig, validate
    from minitorch_dist.planner.cost import step_time
    from minitorch_dist.planner.fit import peak_memory

    problem = _problem(v)
    result = _plan(*problem)
    model, cluster = result.model, result.cluster
    dp = max(1, v["gpus"] // (v["tp"] * v["pp"] * v["cp"]))
    knobs = ("tp", "sp", "cp", "pp", "v", "ep", "zero", "recompute", "micro_batch", "offload")
    config = ParallelConfig(dp=dp, **{k: v[k] for k in knobs})
    kw = {"global_batch": v["global_batch"], "seq_len": v["seq_len"]}
    out: dict[str, Any] = {
        "kind": "planner",
        "label": config.label(),
        "gpus": cluster.gpus,
        "dp": dp,
        "fitting": len(result.fitting),
    }
    try:
        validate(model, cluster, config, **kw)
    except ValueError as err:
        out.update(valid=False, reason=str(err))
    else:
        memory = peak_memory(model, config, **kw)
        fits = memory["total"] <= cluster.memory_bytes
        t = step_time(model, cluster, config, **kw)
        parts = (*MEMORY_PARTS["planner"], "total")
        out.update(
            valid=True,
            fits=fits,
            stage=memory["stage"],
            memory={p: memory[p] for p in parts},
            rows=_bars(memory, parts, max(memory["total"], cluster.memory_bytes)),
            capacity=format_bytes(cluster.memory_bytes),
            time={p: getattr(t, p) for p in (*TIME_PARTS, "total")},
            mfu=t.mfu,
            summary=(
                f"step {t.total:.3f} s ("
                + ", ".join(f"{p} {getattr(t, p):.3f} s" for p in TIME_PARTS if getattr(t, p))
                + f"); MFU {t.mfu:.1%}"
            ),
            rank=_ranks(*problem).get(config) if fits else None,
        )
    out["top"] = [
        {
            "label": r.config.label(),
            "total": r.time.total,
            "mfu": r.time.mfu,
            "memory": r.memory["total"],
            "text": f"{r.config.label()}: {r.time.total:.3f} s, MFU {r.time.mfu:.1%}, "
            f"{format_bytes(r.memory['total'])}",
        }
        for r in result.fitting[:TOP]
    ]
    return out


def live_result(kind: str, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the live widget ``kind`` shows for ``inputs`` (control name -> value; controls left
    out keep their defaults), as JSON-ready data. The page calls this same function in Pyodide.

    ``"predictor"``: ``bytes`` (:func:`~minitorch_dist.memory.predict`'s result), ``device_bytes``,
    ``fits``, ``rows`` (per category: bytes, their text and the bar's width) and ``verdict``.
    ``"planner"``: the configuration's ``label`` and ``dp``, ``valid`` (else ``reason``: the rule
    it breaks), its peak ``memory`` on ``stage``, ``fits``, step ``time`` by part, ``mfu``,
    ``rank`` among the ``fitting`` configurations, and the planner's ``top`` five.
    A ValueError (an unknown control or choice, a model the arithmetic refuses) gives
    ``{"kind": kind, "error": message}``."""
    try:
        values = _checked(kind, {} if inputs is None else inputs)
        return _predictor(values) if kind == "predictor" else _planner(values)
    except ValueError as err:
        return {"kind": kind, "error": str(err)}


def live_steps(kind: str, inputs: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """:func:`live_result` in steps, for a page that must stay responsive while Python works: for
    a planner problem not ranked yet, yields ``{"done": k, "parts": n, "configurations": c}``
    after each part of the ranking (:func:`_plan_parts`); last, always,
    ``{"result": live_result(kind, inputs)}``, the same answer as one call."""
    try:
        problem = _problem(_checked(kind, {} if inputs is None else inputs))
    except (ValueError, KeyError):
        problem = None  # not a planner, or bad input: live_result says why
    if kind == "planner" and problem is not None:
        try:
            for done, parts, found in _plan_parts(*problem):
                yield {"done": done, "parts": parts, "configurations": found}
        except ValueError:
            pass  # a problem the planner refuses: live_result gives the message
    yield {"result": live_result(kind, inputs)}
