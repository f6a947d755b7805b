"""The naming rule for bytes (issue 28): a closed form is ``<technique>_bytes``, a measurement
``count_<technique>_bytes``. Names from before the rule stay as aliases for one release, listed
here (and in the CHANGELOG); a new name that breaks the rule fails this test.
"""

from __future__ import annotations

import importlib
import inspect
import re
import warnings

import pytest

# the modules of closed forms (one per topic) and of measurements that count bytes
CLOSED_FORMS = (
    "minitorch_dist.comm.cost",
    "minitorch_dist.tensor_parallel.cost",
    "minitorch_dist.context_parallel.cost",
    "minitorch_dist.expert_parallel.cost",
    "minitorch_dist.pipeline.cost",
)
MEASURES = (
    "minitorch_dist.tensor_parallel.measure",
    "minitorch_dist.context_parallel.measure",
    "minitorch_dist.expert_parallel.measure",
    "minitorch_dist.pipeline.measure",
    "minitorch_dist.zero.measure",
)
# old name -> new name, in the module that defines the new one
ALIASES = {
    "minitorch_dist.tensor_parallel.cost": {"tp_comm_bytes": "tp_bytes"},
    "minitorch_dist.context_parallel.cost": {
        "ring_bytes_per_rank": "ring_attention_bytes",
        "allgather_bytes_per_rank": "allgather_attention_bytes",
        "ulysses_bytes_per_rank": "ulysses_attention_bytes",
        "hybrid_cp_bytes": "hybrid_attention_bytes",
    },
    "minitorch_dist.zero.measure": {
        "zero_comm_bytes": "zero_bytes",
        "expected_comm_bytes": "zero_step_bytes",  # warns DeprecationWarning
    },
}
# measurements of memory, not of communication: named for what they hold
MEMORY = {"fake_zero_bytes"}
CLOSED = re.compile(r"[a-z][a-z0-9_]*_bytes")
BAD = ("_per_rank", "_comm_bytes", "expected_")


def _bytes_functions(module_name: str) -> dict[str, object]:
    module = importlib.import_module(module_name)
    public = getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")])
    return {n: getattr(module, n) for n in public if "bytes" in n and callable(getattr(module, n))}


@pytest.mark.parametrize("module_name", CLOSED_FORMS + MEASURES)
def test_bytes_functions_follow_the_naming_rule(module_name: str) -> None:
    aliases = ALIASES.get(module_name, {})
    for name in _bytes_functions(module_name):
        if name in aliases or name in MEMORY:
            continue
        assert CLOSED.fullmatch(name) and not any(b in name for b in BAD), (
            f"{module_name}.{name}: a closed form is named <technique>_bytes and a measurement "
            "count_<technique>_bytes; rename it and keep the old name in ALIASES"
        )
        if module_name in CLOSED_FORMS:
            assert not name.startswith("count_"), (
                f"{module_name}.{name}: closed forms count nothing"
            )


@pytest.mark.parametrize("module_name", sorted(ALIASES))
def test_old_names_still_work(module_name: str) -> None:
    module = importlib.import_module(module_name)
    for old, new in ALIASES[module_name].items():
        assert old in module.__all__ and new in module.__all__, (module_name, old, new)
        alias, target = getattr(module, old), getattr(module, new)
        if alias is not target:  # a deprecated function: warns and calls the new one
            assert inspect.signature(alias) == inspect.signature(target), old
            assert "deprecated" in (alias.__doc__ or "").lower(), old


def test_the_aliases_that_labs_call_print_no_warning() -> None:
    from minitorch_dist.context_parallel import ring_bytes_per_rank
    from minitorch_dist.tensor_parallel import tp_comm_bytes
    from minitorch_dist.zero.measure import zero_comm_bytes

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ring_bytes_per_rank(1, 2, 16, 8, 4) == 3 * 2 * 2 * 4 * 8 * 2
        assert tp_comm_bytes(micro_batch=1, seq_len=4, hidden=8, tp=2) > 0
        assert zero_comm_bytes(100, 1, 4) > 0


def test_expected_comm_bytes_warns_and_returns_the_new_value() -> None:
    from minitorch_dist.zero import measure

    class _Opt:  # what zero_step_bytes reads of a ZeroOptimizer
        world_size = 4

        @staticmethod
        def comm_payloads() -> dict[str, int]:
            return {"reduce_scatter": 64, "all_gather": 64}

    with pytest.warns(DeprecationWarning, match="zero_step_bytes"):
        old = measure.expected_comm_bytes(_Opt())
    assert old == measure.zero_step_bytes(_Opt()) == 2 * 64 * 3 / 4
