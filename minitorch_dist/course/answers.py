"""Check a notebook exercise's answer without the notebook showing the answer.

A lab's exercise cell ends with ``check_answer("lab05.5", (naive_s, bucket_s))``. The check
compares the student's value with a stored digest (``answer_digests.py``), not with a literal
answer or a call to the package function that computes it:

* an exact answer (an int, a string, a bool) is digested as a salted sha256 of its canonical
  text (an integral float such as ``8.0`` counts as the int ``8``);
* a float answer is rounded to the exercise's significant digits first, and the check tries the
  value and its neighbours one unit in the last kept place either side, so a right answer that
  lands on the other side of a rounding boundary still passes (about one unit from the
  reference passes, two units fail);
* a tuple answer is checked part by part, and the error names the wrong part.

The reference answers live in the instructor's tests (tests/test_lab_answers_exercises.py, which
the student release leaves out); :func:`make_digests` turns them into the stored digests, and a
test regenerates them and compares, so the two cannot drift. A digest hides the answer from a
reader of the notebook; it does not stop a determined search over small integers.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .renamed_tasks import current_task

__all__ = ["Answer", "check_answer", "load_digests", "make_digests", "write_digests"]

_SALT = "minitorch_dist/answers/v1"
_ID = re.compile(r"^lab\d\d\.\d+$")
DIGEST_FILE = Path(__file__).with_name("answer_digests.py")


@dataclass(frozen=True)
class Answer:
    """A reference answer: ``value`` (a number, string, or tuple of them); ``digits``, the
    significant digits a float answer is checked to (None: exact); ``names``, one per part."""

    value: Any
    digits: int | None = None
    names: tuple[str, ...] = ()


def _parts(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _exact_text(x: Any) -> str:
    if isinstance(x, str):
        return json.dumps(x)
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    try:
        return str(operator.index(x))  # int, numpy or torch integer
    except TypeError:
        return repr(float(x)) if isinstance(x, float) else repr(x)


def _rounded(x: float, digits: int) -> str:
    return f"{float(x):.{digits - 1}e}"


def _float_texts(x: Any, digits: int) -> set[str]:
    """The value rounded to ``digits`` significant digits, and its neighbours one unit in the
    last kept place either side (at this exponent and the one below, for 9.99... vs 1.00...)."""
    x = float(x)
    if not math.isfinite(x):
        return {repr(x)}
    texts = {_rounded(x, digits)}
    exponent = math.floor(math.log10(abs(x))) if x else 0
    for e in (exponent, exponent - 1):
        unit = 10.0 ** (e - digits + 1)
        texts |= {_rounded(x - unit, digits), _rounded(x + unit, digits)}
    return texts


def _digest(exercise: str, part: int, text: str) -> str:
    return hashlib.sha256(f"{_SALT}|{exercise}|{part}|{text}".encode()).hexdigest()


def make_digests(reference: Mapping[str, Answer]) -> dict[str, dict]:
    """The stored form of reference answers: per exercise, its kind and one digest per part."""
    out: dict[str, dict] = {}
    for exercise, answer in sorted(reference.items()):
        if not _ID.match(exercise):
            raise ValueError(f"exercise ids look like 'lab05.5', got {exercise!r}")
        parts = _parts(answer.value)
        if answer.names and len(answer.names) != len(parts):
            raise ValueError(f"{exercise}: {len(answer.names)} names for {len(parts)} parts")
        if answer.digits is not None and answer.digits < 1:
            raise ValueError(f"{exercise}: digits must be >= 1, got {answer.digits}")
        digests = [
            _digest(
                exercise, i, _exact_text(v) if answer.digits is None else _rounded(v, answer.digits)
            )
            for i, v in enumerate(parts)
        ]
        out[exercise] = {"digits": answer.digits, "names": list(answer.names), "digests": digests}
    return out


def write_digests(reference: Mapping[str, Answer], path: str | Path = DIGEST_FILE) -> None:
    """Write :func:`make_digests` of ``reference`` as the Python module the package loads."""
    body = json.dumps(make_digests(reference), indent=4).replace("null", "None")
    Path(path).write_text(
        '"""Digests of the exercises\' answers, written by minitorch_dist.answers.write_digests.'
        '"""\n\nDIGESTS = ' + body + "\n"
    )


def load_digests() -> dict[str, dict]:
    """The stored digests, keyed by exercise id."""
    from .answer_digests import DIGESTS

    return DIGESTS


def _tolerance(digits: int | None) -> str:
    if digits is None:
        return "exact"
    return f"{digits} significant digits, \u00b1 one unit in the last"


def check_answer(exercise_id: str, value: Any, digests: Mapping[str, dict] | None = None) -> None:
    """Raise AssertionError unless ``value`` is exercise ``exercise_id``'s answer (checked
    against its digest); print a one-line confirmation when it is. A renamed exercise's old id
    checks its new one (:mod:`.renamed_tasks`)."""
    exercise_id = current_task(exercise_id)
    stored = (load_digests() if digests is None else digests).get(exercise_id)
    if stored is None:
        raise ValueError(f"no stored answer for exercise {exercise_id!r} (ids look like lab05.5)")
    digits, names, expected = stored["digits"], stored["names"], stored["digests"]
    parts = _parts(value)
    what = f" ({', '.join(names)})" if names else ""
    if len(parts) != len(expected):
        raise AssertionError(
            f"{exercise_id}: expects {len(expected)} value(s){what}, got {len(parts)}"
        )
    for i, (part, digest) in enumerate(zip(parts, expected)):
        try:
            texts = {_exact_text(part)} if digits is None else _float_texts(part, digits)
        except (TypeError, ValueError, OverflowError):
            texts = {repr(part)}
        if not any(_digest(exercise_id, i, t) == digest for t in texts):
            which = ""
            if len(expected) > 1:
                which = f" (part {i + 1} of {len(expected)}" + (f", {names[i]})" if names else ")")
            raise AssertionError(
                f"{exercise_id}{which}: {part!r} is not the expected answer (checked against a "
                f"digest; tolerance: {_tolerance(digits)})"
            )
    print(f"{exercise_id}: correct")
