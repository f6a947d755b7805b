"""The planner's exact count against the package's own code, measured on fake tensors.

Two small layouts (the tiny preset) run one rank of benchmarks/planner_vs_code.py's programs --
tensor + sequence parallelism with ZeRO-1, and the last stage of a 1F1B pipeline -- and the
planner's ``activations="exact"`` peak must be within 5 % of the measured peak. The textbook
count (Korthikanti) is not: the test also checks that the two differ, so that it can fail.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from minitorch_dist.planner import ParallelConfig

ROOT = Path(__file__).resolve().parents[1]


def _bench():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location(
        "planner_vs_code", ROOT / "benchmarks" / "planner_vs_code.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LAYOUTS = [
    (ParallelConfig(dp=2, tp=2, sp=True, zero=1, recompute="selective"), 1, 0),
    (ParallelConfig(dp=1, tp=2, pp=2, sp=True, zero=1, recompute="none"), 2, 1),
]


@pytest.mark.parametrize(("config", "micro_batches", "stage"), LAYOUTS)
def test_exact_planner_within_five_percent_of_the_code(config, micro_batches, stage) -> None:  # noqa: ANN001
    bench = _bench()
    lay = bench.Layout("tiny", config, 64, 4, micro_batches)
    got = bench.measure(lay, stage)["peak"]
    exact = bench.predict(lay, stage, "exact")
    textbook = bench.predict(lay, stage, "korthikanti")
    assert abs(got / exact - 1) <= 0.05, (
        f"{config.label()} stage {stage}: measured {got:,} B, planner (exact) {exact:,} B"
    )
    assert exact != textbook


def test_activations_choice_is_checked() -> None:
    from minitorch_dist.planner import as_model, rank_memory

    with pytest.raises(ValueError, match="activations"):
        rank_memory(as_model("tiny"), ParallelConfig(), seq_len=64, global_batch=1,
                    activations="textbook")  # fmt: skip
    assert dataclasses.is_dataclass(ParallelConfig())
