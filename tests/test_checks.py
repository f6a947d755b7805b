"""The shared argument checks (``minitorch_dist.checks``): one wording, and no bool let through.

Not graded. Each case is a value that a hand-written ``isinstance(x, int)`` check lets pass
(``True`` is an ``int`` in Python) or a message a caller's test matches.
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from minitorch_dist.checks import (
    check_bool,
    check_choice,
    check_divisible,
    check_int,
    check_positive,
)
from minitorch_dist.memory import activation_bytes, model_state_bytes
from minitorch_dist.models import LlamaConfig


def test_check_int_accepts_and_returns_the_value() -> None:
    """Catches a check that changes what it accepts (returns something else, or refuses 1)."""
    assert check_int("layers", 1) == 1
    assert check_int("layers", 32) == 32
    assert check_int("num_params", 0, minimum=0) == 0
    assert check_int("rank", 3, minimum=0, maximum=3) == 3


@pytest.mark.parametrize("value", [True, False, 0, -1, 1.0, 2.5, "2", None, math.nan])
def test_check_int_refuses_bools_zero_negatives_floats(value: object) -> None:
    """Catches True passing for 1 (bool is a subclass of int), and floats or strings accepted."""
    with pytest.raises(
        ValueError, match=re.escape(f"micro_batch must be an integer >= 1, got {value!r}")
    ):
        check_int("micro_batch", value)


def test_check_int_message_names_the_range() -> None:
    """Catches a message that hides the bound the value broke."""
    with pytest.raises(ValueError, match=r"num_params must be an integer >= 0, got -1"):
        check_int("num_params", -1, minimum=0)
    with pytest.raises(ValueError, match=r"rank must be an integer in \[0, 3\], got 4"):
        check_int("rank", 4, minimum=0, maximum=3)
    with pytest.raises(ValueError, match=r"rank must be an integer in \[0, 3\], got True"):
        check_int("rank", True, minimum=0, maximum=3)


def test_check_positive() -> None:
    """Catches zero, negatives, NaN, bools and strings accepted as a positive number."""
    assert check_positive("lr", 1e-3) == 1e-3
    assert check_positive("bucket_cap_mb", 25) == 25
    assert check_positive("theta", math.inf) == math.inf
    for bad in (0, 0.0, -1.5, math.nan, True, "25", None):
        with pytest.raises(ValueError, match="bucket_cap_mb must be a number > 0, got"):
            check_positive("bucket_cap_mb", bad)


def test_check_bool() -> None:
    """Catches 0, 1 or "yes" taken for a flag."""
    assert check_bool("offload", True) is True
    assert check_bool("offload", False) is False
    for bad in (0, 1, "yes", None):
        with pytest.raises(
            ValueError, match=re.escape(f"offload must be True or False, got {bad!r}")
        ):
            check_bool("offload", bad)


def test_check_choice_lists_the_choices_in_order() -> None:
    """Catches a typo passing silently, and a message that does not say what is allowed."""
    choices = ("none", "selective", "full")
    assert check_choice("recompute", "full", choices) == "full"
    with pytest.raises(ValueError, match="recompute must be one of none, selective, full, got 'x'"):
        check_choice("recompute", "x", choices)
    policies = {"none": 0, "full": 1, "selective": 2}  # a dict: its keys are the choices
    assert check_choice("policy", "selective", policies) == "selective"
    with pytest.raises(ValueError, match="policy must be one of none, full, selective, got 1"):
        check_choice("policy", 1, policies)


def test_check_choice_refuses_a_bool_for_a_number() -> None:
    """Catches ``True in (0, 1, 2, 3)`` holding: zero_stage=True is not stage 1."""
    stages = (0, 1, 2, 3)
    assert check_choice("zero_stage", 3, stages) == 3
    with pytest.raises(ValueError, match="zero_stage must be one of 0, 1, 2, 3, got True"):
        check_choice("zero_stage", True, stages)
    assert check_choice("flag", True, (True, False)) is True  # where a bool is a choice, fine


def test_check_divisible() -> None:
    """Catches a split that does not come out whole, with the message tensor parallelism uses."""
    assert check_divisible("heads", 32, "tp", 8) == 4
    with pytest.raises(ValueError, match="heads=12 is not divisible by tp=8"):
        check_divisible("heads", 12, "tp", 8)


def test_the_package_uses_them() -> None:
    """Catches a caller that still lets True through where a count or a stage is asked for."""
    with pytest.raises(ValueError, match="micro_batch must be an integer >= 1, got True"):
        activation_bytes(seq_len=8, micro_batch=True, hidden=64, heads=4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="zero_stage must be one of 0, 1, 2, 3, got True"):
        model_state_bytes(10, zero_stage=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="layers must be an integer >= 1, got True"):
        dataclasses.replace(LlamaConfig.from_preset("tiny"), layers=True)
