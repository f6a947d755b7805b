"""The progress bar (``minitorch_dist.progress``): silent wherever outputs must be deterministic,
drawn in a terminal, and counting what it yields."""

from __future__ import annotations

import io
import sys

import pytest

from minitorch_dist import progress as pg


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def as_terminal(monkeypatch) -> FakeTTY:
    """Make stderr a terminal, outside CI, the make commands and pytest as far as progress can
    tell. Called from the test's body: pytest sets PYTEST_CURRENT_TEST and its own stderr
    again when a test's call begins, after fixtures ran."""
    fake = FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake)
    for name in ("CI", "MINITORCH_DIST_PROGRESS", "PYTEST_CURRENT_TEST"):
        monkeypatch.delenv(name, raising=False)
    return fake


def test_draws_in_a_terminal_and_counts(monkeypatch):
    """Catches a bar that never draws, loses or repeats items, or ends on a wrong count."""
    terminal = as_terminal(monkeypatch)
    items = list(pg.progress(range(40), desc="plan", interval=0.0))
    assert items == list(range(40))
    out = terminal.getvalue()
    frames = out.split("\r")[1:]
    assert frames[0].startswith("plan: |" + " " * pg.WIDTH + "| 0/40")
    assert len(frames) == 42  # the first frame, one per item, the final one
    assert [int(f.rsplit("| ", 1)[1].split("/")[0]) for f in frames] == [0, *range(1, 41), 40]
    assert frames[-1].startswith("plan: |" + "#" * pg.WIDTH + "| 40/40") and out.endswith("\n")


def test_counts_a_generator_without_total_and_an_early_break(monkeypatch):
    """Catches a crash on an iterable without len() and a bar left open when the loop breaks."""
    terminal = as_terminal(monkeypatch)
    gen = (i for i in range(10))
    bar = pg.progress(gen, desc="g", interval=0.0)
    for i in bar:
        if i == 4:
            break
    bar.close()
    frames = terminal.getvalue().split("\r")[1:]
    assert frames[-1].startswith("g: 4 ") and terminal.getvalue().endswith("\n")
    assert "|" not in terminal.getvalue()  # no bar without a total


@pytest.mark.parametrize(
    "env", [{"MINITORCH_DIST_PROGRESS": "0"}, {"CI": "true"}, {"PYTEST_CURRENT_TEST": "x"}]
)
def test_silent_under_the_switches(monkeypatch, env):
    """Catches output under the make commands, CI or pytest, where it would break nbval."""
    terminal = as_terminal(monkeypatch)
    assert pg.mode() == "terminal"
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert pg.mode() is None
    assert list(pg.progress(range(100), desc="x", interval=0.0)) == list(range(100))
    assert terminal.getvalue() == ""


def test_silent_when_stderr_is_not_a_terminal(monkeypatch):
    """Catches a bar written into a log file or a pipe (the book build, redirected runs)."""
    as_terminal(monkeypatch)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert pg.mode() is None
    assert sum(pg.progress(range(5), interval=0.0)) == 10
    assert sys.stderr.getvalue() == ""


def test_notebook_only_with_a_frontend(monkeypatch):
    """Catches a kernel run by nbval or nbclient (no frontend) drawing into stored outputs, and a
    person's notebook not updating its line in place."""
    terminal = as_terminal(monkeypatch)
    monkeypatch.setattr(pg, "_in_kernel", lambda: True)
    for name in pg.FRONTEND_ENV:
        monkeypatch.delenv(name, raising=False)
    assert pg.mode() is None
    monkeypatch.setenv("JPY_SESSION_NAME", "lab.ipynb")
    assert pg.mode() == "notebook"
    shown = []

    class Handle:
        def update(self, data, raw):
            shown.append(data["text/plain"])

    monkeypatch.setattr(pg._Notebook, "__init__", lambda self: setattr(self, "handle", Handle()))
    assert list(pg.progress(range(3), desc="nb", interval=0.0)) == [0, 1, 2]
    assert shown[0].startswith("nb: |") and "| 3/3 " in shown[-1] and len(shown) == 5
    assert terminal.getvalue() == ""


def test_a_loop_inside_a_drawn_loop_stays_silent(monkeypatch):
    """Catches nested bars overwriting each other's line (the planner's search inside the
    planner benchmark's repeats): only the outer one draws, and it still counts."""
    terminal = as_terminal(monkeypatch)
    seen = [
        (i, j)
        for i in pg.progress(range(3), desc="outer", interval=0.0)
        for j in pg.progress(range(4), desc="inner", interval=0.0)
    ]
    assert len(seen) == 12 and "inner" not in terminal.getvalue()
    assert terminal.getvalue().split("\r")[-1].startswith("outer: |" + "#" * pg.WIDTH + "| 3/3")
    assert list(pg.progress(range(2), desc="after", interval=0.0)) == [0, 1]
    assert "after" in terminal.getvalue()  # the count of drawing bars went back to zero
