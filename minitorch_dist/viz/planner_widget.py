"""The memory predictor grown to every axis: tp, sp, cp, pp (with v), ep, ZeRO, offload -- and
the planner's ranking beside it.

:func:`planner_widget` puts ipywidgets controls over one :class:`~minitorch_dist.planner.ParallelConfig`
of a model on a cluster (``dp`` follows from the GPUs and the other axes). Whenever a control
changes it shows :func:`render_config`: the fullest rank's bytes by part
(:func:`~minitorch_dist.planner.peak_memory`, chapter 6's states and Korthikanti's activations
times the micro-batches in flight), whether they fit or the rule the configuration breaks, the
predicted step time by part (:func:`~minitorch_dist.planner.step_time`), and where the
configuration ranks among every one the planner enumerates for the problem
(:func:`~minitorch_dist.planner.plan`, computed once per model, cluster and batch), with the
planner's top few. The rendering is a pure function, so tests read the HTML without a frontend.
"""

from __future__ import annotations

import html
from typing import Any

from minitorch_dist.figures import COLORS
from minitorch_dist.memory.estimate import RECOMPUTE, format_bytes
from minitorch_dist.models import preset_names
from minitorch_dist.models.moe_configs import moe_preset_names
from minitorch_dist.planner import (
    CLUSTER_PRESETS,
    Cluster,
    ParallelConfig,
    Plan,
    peak_memory,
    plan,
    step_time,
    validate,
)
from minitorch_dist.viz.predictor import Controls

__all__ = ["PlannerWidget", "planner_widget", "render_config"]

PARTS = ("params", "grads", "optimizer", "activations", "logits")
TIME_PARTS = ("compute", "tp", "cp", "ep", "pp", "bubble", "dp", "offload")
POWERS = tuple(2**k for k in range(15))  # 1 ... 16384


def _memory_table(memory: dict[str, int], device: int) -> str:
    scale = max(memory["total"], device) or 1
    rows = []
    for part in (*PARTS, "total"):
        nbytes = memory[part]
        bar = (
            f'<div style="background:{COLORS.get(part, "#444444")};height:0.9em;'
            f'width:{100 * nbytes / scale:.2f}%;min-width:1px"></div>'
        )
        rows.append(
            f'<tr data-part="{part}" data-bytes="{nbytes}"><td>{part}</td>'
            f"<td style='text-align:right'>{html.escape(format_bytes(nbytes))}</td>"
            f'<td style="width:45%">{bar}</td></tr>'
        )
    return f"<table>{''.join(rows)}</table>"


def render_config(result: Plan, config: ParallelConfig, *, top: int = 5) -> str:
    """HTML for ``config`` within the planned problem ``result``: the rule it breaks, or its
    peak bytes per rank (stage ``data-stage``), whether they fit, its step time by part and its
    rank (``data-rank``) among the configurations that fit; then the planner's ``top`` choices."""
    model, cluster = result.model, result.cluster
    kw = {"global_batch": result.global_batch, "seq_len": result.seq_len}
    parts = [f"<h4>{html.escape(config.label())} on {cluster.gpus} GPUs</h4>"]
    try:
        validate(model, cluster, config, **kw)
    except ValueError as err:
        parts.append(
            f'<p data-valid="false">not a valid configuration: {html.escape(str(err))}</p>'
        )
    else:
        memory = peak_memory(model, config, **kw)
        fits = memory["total"] <= cluster.memory_bytes
        parts.append(
            f'<p data-valid="true" data-fits="{str(fits).lower()}" '
            f'data-stage="{memory["stage"]}">peak on stage {memory["stage"]}: '
            f"{html.escape(format_bytes(memory['total']))} of "
            f"{html.escape(format_bytes(cluster.memory_bytes))} -- "
            f"{'fits' if fits else 'does NOT fit'}</p>"
        )
        parts.append(_memory_table(memory, cluster.memory_bytes))
        t = step_time(model, cluster, config, **kw)
        times = ", ".join(f"{p} {getattr(t, p):.3f} s" for p in TIME_PARTS if getattr(t, p))
        rank = result.rank_of(config) if fits else None
        parts.append(
            f'<p data-total="{t.total!r}" data-rank="{rank}">step {t.total:.3f} s '
            f"({times}); MFU {t.mfu:.1%}; rank {rank or '-'} of "
            f"{len(result.fitting):,} that fit</p>"
        )
    rows = "".join(
        f"<li>{html.escape(r.config.label())}: {r.time.total:.3f} s, MFU "
        f"{r.time.mfu:.1%}, {html.escape(format_bytes(r.memory['total']))}</li>"
        for r in result.fitting[:top]
    )
    parts.append(f'<p>the planner\'s top {top}:</p><ol class="ranking">{rows}</ol>')
    return "".join(parts)


class PlannerWidget(Controls):
    """The widget returned by :func:`planner_widget`: ``controls`` (name -> ipywidgets control),
    ``view`` (the HTML), ``config`` and ``plan`` (the current configuration and planned problem),
    ``widget`` (the whole UI)."""

    def __init__(self, **initial: Any) -> None:
        import ipywidgets as w  # lazily: the package imports without ipywidgets

        def dd(options: Any, value: Any, label: str) -> Any:
            return w.Dropdown(options=options, value=value, description=label)

        self.controls: dict[str, Any] = {
            "model": dd([*preset_names(), *moe_preset_names()], "llama-3-70b", "model"),
            "cluster": dd(list(CLUSTER_PRESETS), "dgx-h100", "cluster"),
            "gpus": dd(POWERS[3:], 64, "GPUs"),
            "seq_len": dd(POWERS[7:] + (2**17,), 4096, "sequence"),
            "global_batch": dd(POWERS, 256, "global batch"),
            "tp": dd(POWERS[:5], 8, "tp"),
            "sp": w.Checkbox(value=True, description="sequence parallel"),
            "cp": dd(POWERS[:7], 1, "cp"),
            "pp": dd(POWERS[:8], 4, "pp"),
            "v": dd((1, 2, 4), 1, "v (interleave)"),
            "ep": dd(POWERS[:9], 1, "ep"),
            "zero": w.ToggleButtons(options=(0, 1, 2, 3), value=1, description="ZeRO"),
            "recompute": w.ToggleButtons(
                options=RECOMPUTE, value="selective", description="recompute"
            ),
            "micro_batch": dd(POWERS[:5], 1, "micro-batch"),
            "offload": w.Checkbox(value=False, description="offload optimizer"),
        }
        self.view = w.HTML()
        self._plans: dict[tuple, Plan] = {}
        self.set(**initial)
        for control in self.controls.values():
            control.observe(self._update, names="value")
        self._update()
        self.widget = w.VBox([*self.controls.values(), self.view])

    def _update(self, change: Any = None) -> None:
        v = {k: c.value for k, c in self.controls.items()}
        cluster = Cluster.from_preset(v["cluster"], v["gpus"])
        key = (v["model"], v["cluster"], v["gpus"], v["global_batch"], v["seq_len"])
        if key not in self._plans:
            self._plans[key] = plan(
                v["model"], cluster, global_batch=v["global_batch"], seq_len=v["seq_len"]
            )
        self.plan = self._plans[key]
        dp = max(1, v["gpus"] // (v["tp"] * v["pp"] * v["cp"]))
        knobs = {
            k: v[k]
            for k in (
                "tp",
                "sp",
                "cp",
                "pp",
                "v",
                "ep",
                "zero",
                "recompute",
                "micro_batch",
                "offload",
            )
        }
        self.config = ParallelConfig(dp=dp, **knobs)
        self.view.value = render_config(self.plan, self.config)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def planner_widget(**initial: Any) -> PlannerWidget:
    """The interactive planner: pick a model (dense or MoE), a cluster, the batch and every axis
    of the layout, and read the fullest rank's bytes, the step time by part and the
    configuration's rank among all the planner enumerates. Needs ipywidgets and a live kernel;
    ``initial`` sets controls, e.g. ``planner_widget(model="llama-3-8b", gpus=16, tp=2)``."""
    return PlannerWidget(**initial)
