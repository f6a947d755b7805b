"""The repository's layout and what it says about itself (ARCHITECTURE.md).

* Nothing a chapter teaches imports the course wing (``minitorch_dist/course/``: make, release,
  grade, answers, the book's extensions): every other module of the package is parsed (``ast``,
  imports inside functions included, old module names resolved to their new place).
* The old names of moved modules (``minitorch_dist._moved``) are the moved modules themselves,
  and ``python -m`` with an old name still runs.
* No file refers to a document the repository does not hold, and no module docstring tells the
  package's history instead of what the module is.
* ARCHITECTURE.md and the package's own map name every folder and subpackage there is.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minitorch_dist._moved import MOVED

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "minitorch_dist"
COURSE = "minitorch_dist.course"
# Not a chapter's code: the wing itself, and the table of old names (which names the wing's
# modules as strings, importing none of them).
OUTSIDE_THE_RULE = ("minitorch_dist.course", "minitorch_dist._moved")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(module: str) -> set[str]:
    """Every module ``module`` imports, at module level or inside a function, absolute, with an
    old name replaced by the module's new one."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return {MOVED.get(name, name) for name in found}


def _in_wing(name: str) -> bool:
    return name == COURSE or name.startswith(COURSE + ".")


def _teaching_modules() -> list[str]:
    return [
        m for m in MODULES if not any(m == o or m.startswith(o + ".") for o in OUTSIDE_THE_RULE)
    ]


def test_the_walker_sees_the_wing_and_the_chapters():
    """Catches a walker that finds nothing (every rule below would pass vacuously): the wing's
    own modules import each other, and the chapters' modules are many."""
    assert "minitorch_dist.course.course_book" in _imports("minitorch_dist.course.book_links")
    assert "minitorch_dist.course.grade_report" in _imports("minitorch_dist.course.grade")
    assert "minitorch_dist.launching.launcher" in _imports("minitorch_dist.zero.measure")
    teaching = _teaching_modules()
    assert len(teaching) > 100 and "minitorch_dist.zero.stage1" in teaching


def test_nothing_a_chapter_teaches_imports_the_course_wing():
    """Catches a technique, a model or a shared leaf importing the course machinery (the grader,
    the release, the book's extensions): what a student imports must not depend on how the
    course is built, graded or handed out. The wing may import the chapters, not the reverse."""
    bad = [
        f"{module} imports {name}"
        for module in _teaching_modules()
        for name in sorted(_imports(module))
        if _in_wing(name)
    ]
    assert not bad, "\n".join(bad)


def test_moved_names_are_the_moved_modules():
    """Catches an old name that fails to import, or imports a copy (a monkeypatch of the copy
    would not reach the code that runs), and an old file left behind beside its alias."""
    for old, new in MOVED.items():
        assert old not in MODULES, f"{old} is both a file and an alias of {new}"
        assert new in MODULES, f"{old} names {new}, which does not exist"
    for old, new in MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
    assert (
        importlib.import_module("minitorch_dist.grade").__spec__.name
        == "minitorch_dist.course.grade"
    )
    from minitorch_dist import launch
    from minitorch_dist.answers import check_answer  # as the lab notebooks import it

    assert callable(launch) and callable(check_answer)


def test_the_commands_run_by_their_old_names_without_torch():
    """Catches ``python -m minitorch_dist.make`` broken by the move (the README's first command,
    run before anything is installed: the wing's command-line tools import no torch)."""
    code = (
        "import sys, minitorch_dist.make, minitorch_dist.release, minitorch_dist.answers\n"
        "assert 'torch' not in sys.modules, 'the course wing imported torch'\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "minitorch_dist.make"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "python3 -m minitorch_dist.make quick" in run.stderr, run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "minitorch_dist.release", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and "--labs" in run.stdout, run.stderr


BINARY = {".png", ".svg", ".zip", ".json", ".pdf", ".pickle"}


def _tracked_text_files() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = []
    for name in listed:
        path = ROOT / name
        if path.is_file() and path.suffix not in BINARY:
            files.append(path)
    return files


# Documents of other projects, cited with their project; and a placeholder in a --help text.
EXTERNAL_DOCUMENTS = {"PERFORMANCE.md", "PATH.md"}


def test_no_file_refers_to_a_document_the_repository_lacks():
    """Catches a reference to a design or style note that was never committed (a reader finds
    nothing), and this checkout's own path written into a file."""
    present = {p.name for p in ROOT.glob("*.md")}
    documents = re.compile(r"\b[A-Z][A-Z0-9_-]*\.md\b")
    missing, local = [], []
    for path in _tracked_text_files():
        text = path.read_text(errors="replace")
        for name in set(documents.findall(text)) - present - EXTERNAL_DOCUMENTS:
            missing.append(f"{path.relative_to(ROOT)} refers to {name}")
        if str(ROOT) in text:
            local.append(str(path.relative_to(ROOT)))
    assert not missing, "\n".join(missing)
    assert not local, f"files holding this checkout's path {ROOT}: {local}"


_HISTORY = re.compile(
    r"\badded by\b|\bsplit out of\b|\bmoved (?:here|from)\b|\bch\d\d-[a-z]+\b|\bthis session\b"
    r"|\bintegrator\b|\bhelper [A-Z]\b",
    re.IGNORECASE,
)


def test_module_docstrings_say_what_not_when():
    """Catches a docstring that records how the code came to be ("added by ch07-core", "split out
    of release.py"): that belongs in git's history; a docstring says what the module is."""
    bad = []
    for module, path in MODULES.items():
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        bad += [f"{module}: {m.group(0)!r}" for m in _HISTORY.finditer(doc)]
    assert not bad, "\n".join(bad)


def _units() -> set[str]:
    """The package's subpackages and top-level modules, by name (private ones left out)."""
    names = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    names |= {p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_")}
    return names


def test_architecture_names_every_folder_and_unit():
    """Catches ARCHITECTURE.md (or the package's docstring map) falling behind the code: a new
    subpackage or top-level module nobody described, or a described folder that is gone."""
    architecture = (ROOT / "ARCHITECTURE.md").read_text()
    package_map = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text())) or ""
    for unit in sorted(_units()):
        assert re.search(rf"\b{unit}\b", architecture), f"ARCHITECTURE.md does not mention {unit}"
        assert re.search(rf"\b{unit}\b", package_map), f"minitorch_dist's map misses {unit}"
    layout = architecture.split("```", 2)[1]  # the first code block: the layout
    for folder in re.findall(r"^([A-Za-z_.][\w.-]*)/", layout, re.MULTILINE):
        assert (ROOT / folder).is_dir(), f"ARCHITECTURE.md names {folder}/, which does not exist"
    assert "ARCHITECTURE.md" in (ROOT / "README.md").read_text()


def test_the_public_api_in_architecture_is_importable():
    """Catches ARCHITECTURE.md's table of public names naming one that does not exist (renamed
    without an alias, or mistyped): each row's names are imported from its module."""
    section = (ROOT / "ARCHITECTURE.md").read_text().split("## Public API", 1)[1].split("\n## ")[0]
    rows = re.findall(r"^\| [^|]+ \| `([\w.]+)` \| (.+) \|$", section, re.MULTILINE)
    assert len(rows) > 20, "the walker found no rows in ARCHITECTURE.md's public API"
    missing = []
    for module, names in rows:
        imported = importlib.import_module(module)
        missing += [
            f"{module}.{n}" for n in re.findall(r"`(\w+)`", names) if not hasattr(imported, n)
        ]
    assert not missing, f"ARCHITECTURE.md names what does not exist: {missing}"


def test_the_slow_list_names_tests_that_exist():
    """Catches a test renamed or removed while conftest.py still marks it ``slow`` by name (the
    mark would then silently fall off the renamed test, and ``make quick`` grow)."""
    conftest = ast.parse((ROOT / "tests" / "conftest.py").read_text())
    listed = next(
        ast.literal_eval(node.value)
        for node in conftest.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SLOW_TESTS"
    )
    missing = []
    for entry in sorted(listed):
        file, name = entry.split("::")
        path = ROOT / "tests" / file
        names = (
            {
                n.name
                for n in ast.walk(ast.parse(path.read_text()))
                if isinstance(n, ast.FunctionDef)
            }
            if path.exists()
            else set()
        )
        if name not in names:
            missing.append(entry)
    assert not missing, f"conftest.py's SLOW_TESTS names no such test: {missing}"
