"""Every lab stays deterministic: nbval passes on its committed outputs twice in a row."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.parametrize("lab", sorted(p.stem for p in (ROOT / "labs").glob("lab*.ipynb")))
def test_lab_passes_nbval_twice_in_a_row(lab: str) -> None:
    """Catches output that changes from run to run (ports, pids, timings, warnings that come and
    go), which would make the committed outputs of a rank-launching notebook flaky."""
    cmd = [
        sys.executable, "-m", "pytest", "--nbval", f"labs/{lab}.ipynb",
        "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "-q", "-p", "no:cacheprovider",
    ]  # fmt: skip
    for attempt in (1, 2):
        run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, f"run {attempt}:\n{run.stdout[-4000:]}{run.stderr[-2000:]}"
