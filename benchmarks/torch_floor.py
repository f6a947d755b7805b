"""Measure the torch floor: the oldest release on which the labs' graded tests and notebooks pass.

    python benchmarks/torch_floor.py 2.10.0            # one release: venv, graded tests, nbval
    python benchmarks/torch_floor.py 2.7.1 2.8.0 --keep --venvs /work/floor

For each release this makes a virtual environment outside the repository (``--venvs``, default
the system's temporary folder), installs that torch from PyPI (a CUDA build of several GB on
x86_64 Linux; the machine's pip configuration may supply it from disk), then the package's other
dependencies and its ``test`` extra with that torch held by a constraint (pyproject's own floor
is left out, so pip never upgrades the torch under test) and the package itself, editable and
without dependencies. It then runs, in this repository, the same two checks a student's
install depends on:

* the graded tests of labs 0-12 (``pytest tests -m "lab00 or ... or lab12"``), and
* the labs' notebooks against their committed outputs (``pytest --nbval labs/``).

A release passes if both pass. The outcome (counts, the first failing tests and their first error
lines) is merged into ``benchmarks/results/torch_floor.json``, whose ``floor`` is the oldest
release that passed with every newer measured release passing too; pyproject.toml's
``torch>=`` requirement must equal it (tests/test_torch_floor.py checks). The venv is deleted
afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "torch_floor.json"
LABS = [f"lab{n:02d}" for n in range(12)]
GRADED = ["tests", "-m", " or ".join(LABS), "--timeout", "900"]
NBVAL = [
    "--nbval",
    "labs/",
    "--nbval-sanitize-with",
    "tests/nbval_sanitize.cfg",
    "--timeout",
    "900",
]
PYTEST = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE"]


def version_key(version: str) -> tuple[int, ...]:
    """``"2.10.0"`` -> ``(2, 10, 0)`` (a local tag such as ``+cpu`` is ignored)."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0]))


def requirements() -> list[str]:
    """pyproject's dependencies and ``test`` extra, without torch (the release under test)."""
    text = (ROOT / "pyproject.toml").read_text()  # no tomllib: Python 3.10 runs this too
    reqs = []
    for name in ("dependencies", "test"):
        found = re.search(rf"^{name} = \[(.*?)\]", text, re.M | re.S)
        reqs += re.findall(r'"([^"]+)"', found.group(1))
    return [r for r in reqs if not re.match(r"torch\b", r)]


def make_venv(version: str, venv: Path) -> Path:
    """A venv with torch ``version`` and the package (editable); returns its python."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--no-cache-dir"]
    subprocess.run([*pip, f"torch=={version}"], check=True)
    constraint = venv / "torch-constraint.txt"
    constraint.write_text(f"torch=={version}\n")
    subprocess.run([*pip, "-c", str(constraint), *requirements()], check=True)
    subprocess.run([*pip, "--no-deps", "-e", str(ROOT)], check=True)
    installed = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if version_key(installed) != version_key(version):
        raise RuntimeError(f"asked for torch {version}, the venv has {installed}")
    return python


def first_error(out: str) -> str:
    """The first failure's cause: its exception line, or nbval's mismatch and first differing line."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", out)
    text = (
        text.split(" FAILURES ", 1)[-1] if " FAILURES " in text else text.split(" ERRORS ", 1)[-1]
    )
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^E\s+\w+(Error|Exception)", line) or re.match(
            r"^\w+(Error|Exception): ", line
        ):
            return line.lstrip("E ").strip()[:400]
        if "mismatch '" in line:
            diff = next((x.strip() for x in lines[i + 1 : i + 12] if re.match(r"^\s+[-+] ", x)), "")
            return f"{line.strip()}: {diff}"[:400]
    return ""


def run_pytest(python: Path, args: list[str], timeout_s: int, log: Path | None = None) -> dict:
    """Run pytest; the summary counts, the first failures and their first error lines."""
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [str(python), *PYTEST, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        out, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as err:
        out = (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        code = "timeout"
    counts = {}
    if log:
        log.write_text(out)
    summary = [line for line in out.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    if summary:
        for number, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", summary[-1]):
            counts[word.rstrip("s") if word.startswith("error") else word] = int(number)
    failures = [
        line for line in out.splitlines() if line.startswith(("FAILED ", "ERROR "))
    ]  # -rfE's short summary: "FAILED tests/x.py::test - first error line"
    return {
        "first_error": first_error(out),
        "passed": code == 0,
        "exit": code,
        "counts": counts,
        "seconds": round(time.monotonic() - start),
        "first_errors": [line[:400] for line in failures[:5]],
        "n_failures": len(failures),
    }


def measure(
    version: str, venvs: Path, keep: bool, timeout_s: int, checks: list[str], before: dict
) -> dict:
    """Run ``checks`` on ``version``; a check not run keeps its outcome in ``before``."""
    venv = venvs / f"venv-torch-{version}"
    outcome = {k: before[k] for k in ("graded", "nbval") if k in before and k not in checks}
    try:
        python = make_venv(version, venv)
        for check in checks:
            args = GRADED if check == "graded" else NBVAL
            log = venvs / f"torch-{version}-{check}.log"
            outcome[check] = run_pytest(python, args, timeout_s, log)
            result = outcome[check]
            print(f"torch {version}: {check} {result['counts']} in {result['seconds']} s")
    finally:
        if not keep:
            shutil.rmtree(venv, ignore_errors=True)
    missing = {"passed": False, "exit": "not run"}
    graded, nbval = outcome.get("graded", missing), outcome.get("nbval", missing)
    return {
        "passed": graded["passed"] and nbval["passed"],
        "graded": graded,
        "nbval": nbval,
        "machine": "2-core CPU",
        "commit": subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "date": datetime.date.today().isoformat(),
    }


def floor_of(releases: dict[str, dict]) -> str | None:
    """The oldest measured release that passed with every newer measured release passing."""
    floor = None
    for version in sorted(releases, key=version_key, reverse=True):
        if not releases[version]["passed"]:
            break
        floor = version
    return floor


def record(version: str, outcome: dict) -> dict:
    data = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    releases = data.get("releases", {})
    releases[version] = outcome
    releases = dict(sorted(releases.items(), key=lambda item: version_key(item[0])))
    data = {
        "what": "torch releases on which the labs' graded tests (pytest -m 'lab00 or ... or lab12') "
        "and the labs' notebooks (pytest --nbval labs/) pass; made by benchmarks/torch_floor.py",
        "floor": floor_of(releases),
        "releases": releases,
    }
    RESULT.write_text(json.dumps(data, indent=2) + "\n")
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="+", help="torch releases, e.g. 2.10.0")
    parser.add_argument("--venvs", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--keep", action="store_true", help="keep the venvs")
    parser.add_argument("--timeout", type=int, default=7200, help="seconds per test run")
    parser.add_argument(
        "--checks",
        nargs="+",
        choices=["graded", "nbval"],
        default=["graded", "nbval"],
        help="run only these (the other keeps its recorded outcome)",
    )
    args = parser.parse_args()
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    for version in args.versions:
        data = json.loads(RESULT.read_text()) if RESULT.exists() else {}
        before = data.get("releases", {}).get(version, {})
        outcome = measure(version, args.venvs, args.keep, args.timeout, args.checks, before)
        data = record(version, outcome)
        print(f"torch {version}: {'passed' if data['releases'][version]['passed'] else 'FAILED'}")
        print(f"floor so far: {data['floor']}")


if __name__ == "__main__":
    main()
