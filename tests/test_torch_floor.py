"""The torch floor pyproject.toml asks for is the measured one (benchmarks/torch_floor.py).

A student's install (the edition inherits pyproject.toml) keeps a Colab runtime's preinstalled
torch when it satisfies the floor, so the floor must be a release on which the labs' graded tests
and notebooks were seen to pass, and no newer measured release may have failed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "torch_floor.json"


def _key(version: str) -> tuple[int, ...]:
    """``"2.13.0"`` and ``"2.13"`` -> ``(2, 13)`` (trailing zeros and a local tag ignored)."""
    key = [int(part) for part in re.findall(r"\d+", version.split("+")[0])]
    while len(key) > 2 and key[-1] == 0:
        key.pop()
    return tuple(key)


def _pyproject_floor() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"^dependencies = \[(.*?)\]", text, re.M | re.S)
    assert deps, "pyproject.toml has no dependencies list"
    torch = re.findall(r'"torch\s*>=\s*([0-9][0-9.]*)"', deps.group(1))
    assert len(torch) == 1, f"pyproject.toml's dependencies hold no single torch>= floor: {deps[1]}"
    return torch[0]


def test_pyproject_floor_is_the_oldest_passing_release() -> None:
    data = json.loads(RESULT.read_text())
    releases = data["releases"]
    floor = _pyproject_floor()
    assert _key(floor) == _key(data["floor"]), (
        f"pyproject.toml asks torch>={floor}, the measured floor in {RESULT.name} is {data['floor']}"
    )
    assert releases[data["floor"]]["passed"], f"torch {data['floor']} was not seen to pass"
    for version, outcome in releases.items():
        both = outcome["graded"]["passed"] and outcome["nbval"]["passed"]
        assert outcome["passed"] == both, f"torch {version}: 'passed' disagrees with its two runs"
        if _key(version) >= _key(floor):
            assert outcome["passed"], f"torch {version}, newer than the floor {floor}, failed"
    older = [v for v in releases if _key(v) < _key(floor)]
    if older:  # the floor is where passing stops: the next older measured release failed
        below = max(older, key=_key)
        assert not releases[below]["passed"], f"torch {below} passed too: the floor is not oldest"


def test_rank_output_drops_only_gloos_connection_notice(tmp_path: Path) -> None:
    """torch <= 2.10's gloo prints a connection notice from C++ as each rank joins; the launcher
    leaves it out of the relayed output (it would differ from the committed lab outputs)."""
    from minitorch_dist.launching.launcher import _read

    log = tmp_path / "rank0.log"
    notice = (
        "[Gloo] Rank 0 is connected to 3 peer ranks. Expected number of connected peer ranks is : 3"
    )
    log.write_text(f"{notice}\nhello from rank 0\n[Gloo] is a word a student may print\n")
    assert _read(str(log)) == "hello from rank 0\n[Gloo] is a word a student may print\n"
