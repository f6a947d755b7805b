"""check_answer: an exercise's answer checked against a digest, never against the answer itself.

These use made-up exercises (the real reference answers are instructor-only, in
tests/test_lab_answers_exercises.py); they ship with the student edition.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from minitorch_dist.course.answers import Answer, check_answer, load_digests, make_digests

ROOT = Path(__file__).resolve().parent.parent
MADE_UP = make_digests(
    {
        "lab98.1": Answer(1_879_048_192),
        "lab98.2": Answer((8, "fp16"), names=("bytes", "format")),
        "lab98.3": Answer(0.012345678, digits=4),
        "lab98.4": Answer((999.9996, 2.5e-3), digits=4, names=("big", "small")),
    }
)


def check(exercise: str, value: object) -> None:
    check_answer(exercise, value, digests=MADE_UP)


def test_exact_answers_pass_only_when_equal() -> None:
    check("lab98.1", 1_879_048_192)
    check("lab98.1", 1_879_048_192.0)  # an integral float is the same answer
    check("lab98.2", (8, "fp16"))
    check("lab98.2", [8, "fp16"])
    for wrong in (2 * 1_879_048_192, 1_879_048_191, 1_879_048_192.5, "1879048192"):
        with pytest.raises(AssertionError, match=r"not the expected answer \(checked against a "):
            check("lab98.1", wrong)
    with pytest.raises(AssertionError, match=r"lab98.2 \(part 2 of 2, format\).*tolerance: exact"):
        check("lab98.2", (8, "bf16"))


def test_float_answers_pass_within_one_unit_of_the_last_kept_digit() -> None:
    check("lab98.3", 0.012345678)
    check("lab98.3", 0.01234567)  # the same to 4 digits
    check("lab98.3", 0.012344501)  # rounds to 1.234e-2, one unit below 1.235e-2: passes
    check("lab98.3", 0.012355)  # rounds to 1.236e-2, one unit above
    for wrong in (0.01232, 2 * 0.012345678, 0.012345678 / 2, -0.012345678, float("nan")):
        with pytest.raises(AssertionError, match=r"tolerance: 4 significant digits"):
            check("lab98.3", wrong)


def test_a_rounding_boundary_between_decades_does_not_fail_a_right_answer() -> None:
    """999.9996 rounds to 1.000e3; 999.9994 (a right answer, 2e-7 away) rounds to 9.999e2 and
    must pass too, as must the small part's neighbours."""
    check("lab98.4", (999.9996, 2.5e-3))
    check("lab98.4", (999.9994, 2.5004e-3))
    check("lab98.4", (1000.4, 2.4996e-3))
    with pytest.raises(AssertionError, match=r"part 1 of 2, big"):
        check("lab98.4", (2 * 999.9996, 2.5e-3))
    with pytest.raises(AssertionError, match=r"part 2 of 2, small"):
        check("lab98.4", (999.9996, 2.5e-4))


def test_wrong_shape_and_unknown_exercise() -> None:
    with pytest.raises(AssertionError, match=r"expects 2 value\(s\) \(bytes, format\), got 1"):
        check("lab98.2", 8)
    with pytest.raises(ValueError, match="no stored answer for exercise 'lab98.9'"):
        check("lab98.9", 1)
    with pytest.raises(ValueError, match="exercise ids look like"):
        make_digests({"ex1": Answer(1)})


def test_digests_hold_no_answer_and_are_salted_per_exercise() -> None:
    """The stored form names no value, and one answer digests differently in two exercises."""
    text = json.dumps(MADE_UP)
    for literal in ("1879048192", "fp16", "0.01234", "1.235e-02", "999.9"):
        assert literal not in text
    same = make_digests({"lab98.1": Answer(8), "lab98.2": Answer(8)})
    assert same["lab98.1"]["digests"] != same["lab98.2"]["digests"]


def test_every_lab_check_has_a_stored_digest() -> None:
    """Every ``check_answer("labNN.k", ...)`` in a lab notebook has its digest in the package."""
    stored = load_digests()
    for nb in sorted((ROOT / "labs").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            for exercise in re.findall(
                r"check_answer\(\"(lab\d\d\.\d+)\"", "".join(cell["source"])
            ):
                assert exercise in stored, f"{nb.name}: no digest for {exercise}"
