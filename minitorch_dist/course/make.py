"""The README's two commands: build the book, run every test. Standard library only.

    python3 -m minitorch_dist.make book     # create .venv if needed, execute and build the book
    python3 -m minitorch_dist.make test     # lint, unit + graded tests, nbval, student release,
                                            # and the strict book build (eight jobs at once)
    python3 -m minitorch_dist.make quick    # the 3-minute loop: ruff, unit + graded tests
                                            # (no notebooks, no slow or course-machinery tests)
    python3 -m minitorch_dist.make execute labs/lab01_*.ipynb   # re-execute notebooks in place
    python3 -m minitorch_dist.make notebooks  # nbval of the labs only (CI: on a second torch)

Both create ``.venv`` beside this repository and install the package with its book and test
extras the first time (and again whenever pyproject.toml changes). Set ``PIP_CONSTRAINT`` to pin
versions, as CI does (``.ci/constraints.txt``: the CPU torch already on the build machine), and
``MINITORCH_DIST_VENV`` to use another environment (CI's second torch, ``.ci/constraints-newest.txt``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

from minitorch_dist.course.machine import busy, cpu_times, machine_speed

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("MINITORCH_DIST_VENV") or ROOT / ".venv").resolve()
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".minitorch_dist-installed"

# make test's course-machinery jobs: test modules (tests/test_<name>.py, all marked ``course``)
# that get a job of their own, so that no job is much longer than the others; a job
# "course-rest" runs the remaining course tests.
COURSE_JOBS = {
    "mutants": ("mutants",),
    "grading": ("grading", "grade_dependencies", "autograder"),
    "release": ("release",),
}
GRADING_TESTS = tuple(name for names in COURSE_JOBS.values() for name in names)
LABS = " or ".join(f"lab{i:02d}" for i in range(13))  # the graded tests' markers
NICE = 10  # every job of make test but the book's (see test())
BOOK = ["jupyter-book", "build", ".", "-W", "-n", "--keep-going"]
NBVAL = [
    "--nbval",
    "--nbval-sanitize-with",
    "tests/nbval_sanitize.cfg",
    "--timeout",
    "900",
    "-p",
    "minitorch_dist.course.kernel_ports",  # kernels on ports no forked rank takes
]


def _run(cmd: list[str], *, quiet: bool = False, env: dict[str, str] | None = None) -> None:
    """Run ``cmd`` with ``env`` added to this environment; ``quiet`` silences progress bars, whose
    lines must stay out of outputs. Says how long each step took, so the time of the two commands
    can be read off their output."""
    print("+", " ".join(str(c) for c in cmd), flush=True)
    extra = {**(env or {}), **({"MINITORCH_DIST_PROGRESS": "0"} if quiet else {})}
    start = time.monotonic()
    subprocess.run(cmd, cwd=ROOT, check=True, env={**os.environ, **extra})
    what = " ".join(Path(str(c)).name for c in cmd[:3])
    print(f"+ ({time.monotonic() - start:.0f} s: {what})", flush=True)


def ensure_env() -> None:
    """Create .venv and install the package (editable) with its extras, once per pyproject."""
    if sys.version_info < (3, 10):  # noqa: UP036 - this file runs before anything is installed
        sys.exit(f"Python >= 3.10 is needed, this is {sys.version.split()[0]}")
    if not PY.exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    key = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes() + os.environ.get("PIP_CONSTRAINT", "").encode()
    ).hexdigest()
    if STAMP.exists() and STAMP.read_text() == key:
        return
    _run([str(PY), "-m", "pip", "install", "-q", "--upgrade", "pip"])
    _run([str(PY), "-m", "pip", "install", "-q", "-e", ".[book,test]"])
    STAMP.write_text(key)


NO_SOLUTIONS = """
import sys
from minitorch_dist.course.course_book import solution_lines_in_html
leaks = solution_lines_in_html(".", "_build/html")
for page, lines in leaks.items():
    print(f"{page} shows {len(lines)} solution line(s), e.g. {lines[0]!r}")
sys.exit(1 if leaks else 0)
"""


def book() -> None:
    _run(
        [str(PY), "-m", "minitorch_dist.course.vendor"]
    )  # the book's own MathJax and widget scripts
    _run([str(BIN / BOOK[0]), *BOOK[1:]], quiet=True)
    # the Chinese edition (_build/html/zh_CN/) from the same sources and the English build's
    # executed notebooks: it executes nothing (minitorch_dist/course/i18n.py)
    _run([str(PY), "-m", "minitorch_dist.course.i18n", "build"], quiet=True)
    if os.environ.get("MINITORCH_DIST_SOLUTIONS") != "show":  # the book shows no solution
        _run([str(PY), "-c", NO_SOLUTIONS])
    # every page in Debian's headless Chromium, offline (minitorch_dist/course/browser_check.py)
    chromium = Path("/usr/bin/chromium")
    has_playwright = subprocess.run([str(PY), "-c", "import playwright"], capture_output=True)
    if chromium.exists() and has_playwright.returncode == 0:
        shots = ["--screenshots", "_build/screenshots", "--repo-root", "."]
        _run([str(PY), "-m", "minitorch_dist.course.browser_check", "_build/html", *shots])
    else:
        why = "playwright missing" if chromium.exists() else "sudo apt-get install chromium"
        print(f"browser check SKIPPED: no {chromium} or playwright ({why})", flush=True)
    print(f"book written to {ROOT / '_build' / 'html' / 'index.html'}")


def _together(
    jobs: dict[str, list[str]],
    env: dict[str, dict[str, str]],
    nice: dict[str, int] | None = None,
) -> None:
    """Run ``jobs`` (name -> command) at the same time, each writing to its own log under
    ``_build/test-logs/``; say when each ends and how long it took, print the end of a failing
    job's log, and fail if any job failed. Alone, each job leaves a core idle much of the time
    (forked ranks, notebook kernels and the browser wait on each other); together they keep both
    cores busy. Each job's CPU time (its processes and theirs) is printed beside its wall time.
    ``env`` adds variables to each job's environment; ``nice`` lowers the priority of the jobs it
    names (POSIX only)."""
    logs = ROOT / "_build" / "test-logs"
    logs.mkdir(parents=True, exist_ok=True)
    running = {}
    for name, cmd in jobs.items():
        log = logs / f"{name}.log"
        print(f"+ [{name}] {' '.join(str(c) for c in cmd)}  (log: {log.relative_to(ROOT)})")
        out = log.open("w")
        lower = (nice or {}).get(name, 0)
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env[name]},
            preexec_fn=(lambda n=lower: os.nice(n)) if lower and hasattr(os, "nice") else None,
        )
        running[name] = (proc, out, log, time.monotonic())
    failed = []
    while running:
        for name, (proc, out, log, start) in list(running.items()):
            cpu = ""
            if hasattr(os, "wait4"):  # POSIX: the job's exit and its CPU time, in one call
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid == 0:
                    continue
                proc.returncode = os.waitstatus_to_exitcode(status)
                cpu = f", {usage.ru_utime + usage.ru_stime:.0f} s of CPU"
            elif proc.poll() is None:
                continue
            out.close()
            del running[name]
            lines = log.read_text(errors="replace").splitlines()
            last = next((x for x in reversed(lines) if x.strip()), "")
            status = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
            took = f"{time.monotonic() - start:.0f} s{cpu}"
            print(f"+ [{name}] {status} in {took}: {last}", flush=True)
            if proc.returncode:
                print("\n".join(lines[-80:]), flush=True)
                failed.append(jobs[name])
        time.sleep(1)
    if failed:
        raise subprocess.CalledProcessError(1, failed[0])


WARM_UP = """
import importlib, pkgutil
import nbclient, nbval, pytest, minitorch_dist
for m in pkgutil.walk_packages(minitorch_dist.__path__, "minitorch_dist."):
    if m.name != "minitorch_dist.__main__":
        importlib.import_module(m.name)
"""


def test() -> None:
    _run([str(BIN / "ruff"), "check", "."])
    _run([str(BIN / "ruff"), "format", "--check", "."])
    _run(
        [str(PY), "-m", "minitorch_dist.course.vendor"]
    )  # before the tests: they check what it wrote
    if os.environ.get("PYTHONPYCACHEPREFIX"):  # compile once what every job imports (main())
        _run([str(PY), "-c", WARM_UP])
    # Eight jobs at once: the book; nbval of every lab (once); the graded tests; the other unit
    # tests; the course machinery's tests in four. The book is the longest chain (vendor, build,
    # browser check) and runs at normal priority, every other job at nice 10: the book keeps a
    # core while the others share the second, then both once it is done, so neither core waits
    # at the end. tests/test_notebooks.py's second run of each lab (determinism) only when
    # MINITORCH_DIST_NBVAL_PASSES=1, as CI sets it: make test runs each lab once.
    passes = os.environ.get("MINITORCH_DIST_NBVAL_PASSES", "0")
    pytest = [str(PY), "-m", "pytest", "-q", "--durations=15"]  # each log: its slowest tests
    own = [f"tests/test_{name}.py" for name in GRADING_TESTS]
    jobs = {
        "book": [sys.executable, "-m", "minitorch_dist.course.make", "book"],
        "labs": [*pytest, "labs", *NBVAL],
        "graded": [*pytest, "tests", "-m", f"not course and ({LABS})"],
        "unit": [*pytest, "tests", "-m", f"not course and not ({LABS})"],
        **{
            name: [*pytest, *(f"tests/test_{m}.py" for m in modules)]
            for name, modules in COURSE_JOBS.items()
        },
        "course-rest": [*pytest, "tests", "-m", "course", *(f"--ignore={g}" for g in own)],
    }
    env = {"MINITORCH_DIST_NBVAL_PASSES": passes, "MINITORCH_DIST_PROGRESS": "0"}
    # The test jobs run each launch's ranks on one CPU (minitorch_dist/launching/child.py,
    # PIN_RANKS_ENV: less system time when every core is busy); the labs and the book as a
    # reader runs them.
    pinned = {name: {**env, "MINITORCH_DIST_PIN_RANKS": "1"} for name in jobs}
    for name in ("book", "labs"):
        pinned[name] = env
    before = cpu_times()
    _together(jobs, pinned, nice={name: NICE for name in jobs if name != "book"})
    print(busy(before, cpu_times()), flush=True)


def quick() -> None:
    """The loop to run while working: everything `test` runs but the notebooks, the book, and
    the tests marked ``slow`` or ``course`` (release, grading, mutants, book machinery). Three
    pytest runs at once, of similar CPU, so both cores work (one run alone keeps a core idle
    much of the time): the graded tests, then the other tests of the files test_a* to test_l*,
    and of test_m* to test_z*."""
    _run([str(BIN / "ruff"), "check", "."])
    _run([str(BIN / "ruff"), "format", "--check", "."])
    pytest = [str(PY), "-m", "pytest", "-q", "--durations=5", "-m"]
    unit = f"not slow and not course and not ({LABS})"
    files = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("tests/test_*.py"))
    jobs = {
        "quick-graded": [*pytest, f"not slow and not course and ({LABS})", "tests"],
        "quick-unit-a-l": [*pytest, unit, *(f for f in files if Path(f).name < "test_m")],
        "quick-unit-m-z": [*pytest, unit, *(f for f in files if Path(f).name >= "test_m")],
    }
    env = {"MINITORCH_DIST_PROGRESS": "0", "MINITORCH_DIST_PIN_RANKS": "1"}
    _together(jobs, {name: env for name in jobs})


def notebooks() -> None:
    """The labs' stored outputs against a fresh run (nbval), nothing else: CI's second torch."""
    _run([str(PY), "-c", "import torch; print('torch', torch.__version__)"])
    _run([str(PY), "-m", "pytest", "labs", "-p", "no:cacheprovider", *NBVAL], quiet=True)


EXECUTE = """
import sys, nbformat
from pathlib import Path
from nbclient import NotebookClient
for name in sys.argv[1:]:
    path = Path(name).resolve()
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False,
                   store_widget_state=False, resources={"metadata": {"path": str(path.parent)}},
                   ).execute()
    nbformat.write(nb, path)
    print("executed", name)
"""


def execute(notebooks: list[str]) -> None:
    """Re-execute lab notebooks in place, leaving no timestamps or widget ids behind (for nbval)."""
    _run([str(PY), "-c", EXECUTE, *notebooks], quiet=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["execute"] and len(argv) > 1:
        ensure_env()
        execute(argv[1:])
        return 0
    if argv not in (["book"], ["test"], ["quick"], ["notebooks"]):
        print(__doc__, file=sys.stderr)
        return 2
    start = time.monotonic()
    print(f"machine speed: {machine_speed()}", flush=True)
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", ""):
        # Without bytecode every pytest run compiles the package and rewrites the asserts of
        # every test module again: about 6 s of CPU for each run that collects tests/, and make
        # test starts dozens (the grader's, the mutants'). It goes under _build/ instead, never
        # beside the sources, which is what the variable asks for.
        os.environ["PYTHONPYCACHEPREFIX"] = str(ROOT / "_build" / "pycache")
    os.environ.update(PYTHONHASHSEED="0", MPLBACKEND="Agg")
    try:
        ensure_env()
        {"book": book, "test": test, "quick": quick, "notebooks": notebooks}[argv[0]]()
    except subprocess.CalledProcessError as e:
        print(f"\nFAILED: {' '.join(map(str, e.cmd))} (exit {e.returncode})", file=sys.stderr)
        return 1
    print(f"done in {time.monotonic() - start:.0f} s (machine speed at the end: {machine_speed()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
