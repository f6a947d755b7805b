"""Nothing in a student edition computes a stubbed task.

For every task (``# BEGIN SOLUTION labNN.k`` blocks, in the package and in the lab notebooks), its
reference code is searched for in every file the edition ships (what
:func:`minitorch_dist.release.make_release` copies: :func:`~minitorch_dist.release._source_files`
less the instructor-only files), outside the solution blocks of that task's lab and later labs
(an assignment stubs its labs and the later ones; earlier labs keep their reference code). Two
searches, comments and whitespace ignored:

- a copy: a line of the solution at least ``LONG`` characters long, or two consecutive
  non-trivial lines of it, found as they are;
- a rewrite: ``RUN`` consecutive tokens of the solution found with every local name replaced by
  ``N`` (attributes, called functions, keywords and numbers kept), where the run holds at least
  three distinct kept tokens and occurs outside solutions in at most two files (a run found
  everywhere is an idiom, not an answer).

A hit is reference code the edition would ship beside the stub: put it inside the same task's
markers, call the student's code, or compare with stored values (tests/fixtures/). ``KNOWN``
lists the hits found and judged not to hand out an answer, each with its reason.
"""

from __future__ import annotations

import builtins
import functools
import json
import keyword
import re
from collections import defaultdict
from pathlib import Path

import pytest
from mutants_common import grade_replaced, named, owner_of, package_tasks
from mutants_lookups import ATTACKS

from minitorch_dist.course import release

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    (ROOT / release.MARKER_FILE).exists(),
    reason="searches the instructor's source for its solutions",
)
LONG = 30  # a normalised line this long is distinctive on its own
SHORT = 12  # shorter normalised lines are trivial (``return out``, ``k, v = kn, vn``)
RUN = 18  # tokens of a rewrite
_TEXT = {".py", ".ipynb", ".md", ".txt", ".cfg", ".yml", ".toml"}
_TOKEN = re.compile(
    r"""[A-Za-z_]\w*|\d+(?:\.\d*)?(?:e-?\d+)?|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'"""
    r"""|\*\*|//|==|!=|<=|>=|->|[-+*/%@<>=!&|^~:;,.()\[\]{}]"""
)
_KEPT_NAMES = set(keyword.kwlist) | set(dir(builtins))
_PUNCT = set("-+*/%@<>=!&|^~:;,.()[]{}") | {"**", "//", "==", "!=", "<=", ">=", "->", "N", "S"}

# (task, file): why the hit hands out no answer of the task (an idiom, a renaming line)
KNOWN: dict[tuple[str, str], str] = {
    ("lab05.2", "minitorch_dist/zero/sync.py"): (
        "the global rank of the group's rank 0, an idiom: zero's weight broadcast, not DDP's"
    ),
    ("lab01.2", "minitorch_dist/recompute/cost.py"): "s, b, p = seq_len, ...: names only",
    ("lab01.2", "minitorch_dist/planner/roofline.py"): "h, kv, f = config.hidden, ...: names only",
    ("lab01.5", "labs/lab01_where_the_memory_goes.ipynb"): (
        "the check evaluates predict at the student's answer and the next size; it does not search"
    ),
    ("lab01.5", "labs/zh_CN/lab01_where_the_memory_goes.ipynb"): "the Chinese twin's same check",
    ("lab03.2", "minitorch_dist/precision/fp8.py"): "a loop over model.named_modules()",
    ("lab03.2", "minitorch_dist/recompute/op_level.py"): "a loop over model.named_modules()",
    ("lab04.1", "tests/test_recompute_op_level.py"): "loss.backward(); losses.append(...)",
    ("lab04.1", "minitorch_dist/accumulate/accumulate.py"): (
        "naive_accumulation_step, the mistake shown for comparison: the loop, not the weighting"
    ),
    ("lab04.2", "benchmarks/recompute_vs_torch.py"): "an SGD optimizer over the parameters",
    ("lab04.2", "chapters/04_gradient_accumulation.md"): "a call of split_micro_batches",
    ("lab04.2", "colab/chapters/04_gradient_accumulation.ipynb"): "the chapter's copy",
    (
        "lab04.2",
        "minitorch_dist/memory/measure.py",
    ): "with MemoryTracker(model, optimizer): one line",
    ("lab04.2", "minitorch_dist/pipeline/measure.py"): "a dict of the grads' clones",
    ("lab04.2", "minitorch_dist/recompute/measure.py"): "an SGD optimizer over the parameters",
    ("lab04.2", "minitorch_dist/reference.py"): "a dict of the grads' clones",
    ("lab04.2", "minitorch_dist/zero/measure.py"): "a result dict's peak_total entry (one line)",
    ("lab05.3", "minitorch_dist/data_parallel/bucketed.py"): "a loop over bucket.params",
    ("lab05.3", "tests/test_data_parallel.py"): "a loop over bucket.params",
    ("lab06.3", "minitorch_dist/memory/track.py"): "the tensors among tree_leaves(...)",
    ("lab06.3", "minitorch_dist/zero/holdings.py"): "the tensors among tree_leaves(...)",
    ("lab09.1", "minitorch_dist/pipeline/stage.py"): "wait_sends waits with the same timeout",
    ("lab09.3", "minitorch_dist/pipeline/plots.py"): (
        "a plot's count of live micro-batches over given events (one line; the task is the clock)"
    ),
    ("lab10.4", "minitorch_dist/expert_parallel/layer.py"): (
        "the capacity path (buffers of C rows, not lab10.4's sort) ends with the same combine"
    ),
    ("lab12.1", "minitorch_dist/planner/roofline.py"): (
        "the roofline names the group each exchange runs over (tp, cp, ep, pp; dp over "
        "ParallelConfig.shard, whose docstring and chapter 12 say dp x cp): none of step_time's "
        "formulas (link time with latency, ring passes, the bubble, the compute) is in it"
    ),
}
# (task, file): found, judged to hand out part of an answer, not fixed yet (reported as xfail)
OPEN: dict[tuple[str, str], str] = {}


def _strip_comment(line: str) -> str:
    """The line without its comment: the first ``#`` outside a string literal."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote and line[i - 1] != "\\":
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def normalise(line: str) -> str:
    """Comment and every space removed: formatting cannot hide a copy."""
    return re.sub(r"\s+", "", _strip_comment(line))


# a call's opening line as the formatter splits it (``pipeline = apply_pipeline_parallel(``):
# it names what is called, nothing of how, so two calls of one public function do not match
_OPENER = re.compile(r"([\w.,]+=)?[\w.]+[(\[{]")


def _trivial(norm: str) -> bool:
    return (
        len(norm) < SHORT
        or norm.startswith(("raise", "check_", "def", "@"))
        or _OPENER.fullmatch(norm) is not None
    )


def tokens(lines: list[str]) -> list[str]:
    """The lines' tokens, strings as ``S`` and local names as ``N``."""
    out = []
    for line in lines:
        found = _TOKEN.findall(_strip_comment(line))
        for i, tok in enumerate(found):
            if tok[0] in "\"'":
                tok = "S"
            elif (tok[0].isalpha() or tok[0] == "_") and tok not in _KEPT_NAMES:
                before = found[i - 1] if i else ""
                after = found[i + 1] if i + 1 < len(found) else ""
                tok = tok if before == "." or after == "(" else "N"
            out.append(tok)
    return out


def _signatures(lines: list[str]) -> set:
    """A run of lines' long lines, its pairs of consecutive non-trivial lines, and its runs of
    ``RUN`` tokens that hold at least three distinct kept tokens."""
    norm = [n for n in map(normalise, lines) if n]
    found: set = {("line", n) for n in norm if len(n) >= LONG and not _trivial(n)}
    found |= {("pair", a, b) for a, b in zip(norm, norm[1:]) if not (_trivial(a) or _trivial(b))}
    toks = tokens(lines)
    for i in range(len(toks) - RUN + 1):
        run = tuple(toks[i : i + RUN])
        if len(set(run) - _PUNCT) >= 3:
            found.add(("run", *run))
    return found


def _texts(path: Path) -> list[str]:
    """The pieces of text of a shipped file: a notebook's cells, or the whole file."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".ipynb":
        return [text]
    cells = json.loads(text).get("cells", [])
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]


def _split(text: str) -> tuple[dict[str, list[list[str]]], list[str]]:
    """``({task: [its blocks' lines]}, lines outside blocks)``; a block leaves a line ``<task>``
    behind, so no pair of lines spans a stub."""
    blocks: dict[str, list[list[str]]] = defaultdict(list)
    outside: list[str] = []
    task = None
    for line in text.splitlines():
        begin = release._BEGIN.match(line)
        if begin and release._TASK.match(begin.group(2)):
            task = begin.group(2)
            blocks[task].append([])
            outside.append(f"<{task}>")
        elif task and release._END.match(line):
            task = None
        elif task:
            blocks[task][-1].append(line)
        else:
            outside.append(line)
    return blocks, outside


def _shipped() -> list[Path]:
    files = []
    for path in release._source_files(ROOT):
        rel = path.relative_to(ROOT)
        if rel.parts and rel.parts[0] in release._SKIP_DIRS:
            continue
        if any(rel.match(p) for p in release._INSTRUCTOR_ONLY) or path.suffix not in _TEXT:
            continue
        if path.resolve() == Path(release.__file__).resolve():
            continue  # the release tool's docstring shows the markers
        files.append(path)
    return sorted(files)


def _tasks() -> list[str]:
    """Every task with a block in a shipped file, sorted: the parameters of the search's tests,
    read at collection (cheap; the signatures are computed when a test of this file runs)."""
    found: set[str] = set()
    for path in _shipped():
        for text in _texts(path):
            found |= _split(text)[0].keys()
    return sorted(found)


@functools.cache
def _collect() -> tuple[dict, dict, set]:
    """``solutions``: {task: signatures of its blocks}; ``index``: {signature: {(file, lab)}},
    lab None for text outside any block; the tasks with a block in the package. Computed once,
    when the first test of this file runs: about 10 s of CPU that every pytest run collecting
    tests/ (the grader's runs included) would otherwise pay at import."""
    solutions: dict[str, set] = defaultdict(set)
    index: dict[tuple, set] = defaultdict(set)
    package_tasks: set[str] = set()
    for path in _shipped():
        rel = str(path.relative_to(ROOT))
        for text in _texts(path):
            blocks, outside = _split(text)
            for sig in _signatures(outside):
                index[sig].add((rel, None))
            for task, found in blocks.items():
                if rel.startswith("minitorch_dist/"):
                    package_tasks.add(task)
                for lines in found:
                    sigs = _signatures(lines)
                    solutions[task] |= sigs
                    for sig in sigs:
                        index[sig].add((rel, task[:5]))
    return dict(solutions), dict(index), package_tasks


def _show(sig: tuple) -> str:
    return " ".join(sig[1:]) if sig[0] == "run" else " / ".join(sig[1:])


def copies_of(task: str, index: dict | None = None) -> dict[str, list[str]]:
    """{file: what of ``task``'s reference code it shows} in an edition stubbing its lab."""
    solutions, every, _ = _collect()
    index = every if index is None else index
    found: dict[str, list[str]] = defaultdict(list)
    for sig in solutions[task]:
        places = index.get(sig, set())
        if sig[0] == "run" and len({rel for rel, lab in places if lab is None}) > 2:
            continue  # an idiom found all over the edition
        for rel, lab in places:
            if lab is None or lab < task[:5]:
                found[rel].append(_show(sig))
    return dict(found)


def test_every_lab_has_tasks_with_code_to_look_for() -> None:
    """Guards the search itself: every lab's tasks were found, each with code to look for."""
    solutions, _, package_tasks = _collect()
    assert sorted(solutions) == _tasks()
    assert {task[:5] for task in solutions} == {f"lab{i:02d}" for i in range(13)}
    empty = sorted(task for task, sigs in solutions.items() if not sigs)
    assert not set(empty) & package_tasks, empty  # only a notebook's one-line answers are empty


@pytest.mark.parametrize("rename", [False, True])
def test_a_copy_or_a_rewrite_is_found(rename: bool) -> None:
    """The search can fail: lab10.2's queue positions pasted into a test, reformatted (and with
    its variables renamed), are found."""
    pasted = [
        "def helper(idx, n, cap):",
        "    oh = F.one_hot(idx.reshape(-1), n)",
        "    pos = (oh.cumsum(0)  *  oh).sum(-1) - 1  # my own comment",
        "    return (pos < cap).view_as(idx)",
    ]
    if not rename:
        pasted = [line.replace("oh", "onehot").replace("pos", "position") for line in pasted]
        pasted = [
            line.replace("idx", "expert_indices").replace("cap", "capacity") for line in pasted
        ]
    index = {sig: set(places) for sig, places in _collect()[1].items()}
    for sig in _signatures(pasted):
        index.setdefault(sig, set()).add(("tests/test_pasted.py", None))
    assert "tests/test_pasted.py" in copies_of("lab10.2", index)


def test_the_exceptions_are_still_found() -> None:
    """An entry of KNOWN or OPEN that the search no longer finds is stale: remove it."""
    stale = [key for key in (*KNOWN, *OPEN) if key[1] not in copies_of(key[0])]
    assert not stale, stale


@pytest.mark.parametrize("task", _tasks())
def test_the_edition_ships_no_reference_code_of_the_task(task: str) -> None:
    """No file of an edition that stubs ``task`` shows its reference code outside the stub."""
    found = {rel: hits for rel, hits in copies_of(task).items() if (task, rel) not in KNOWN}
    if found and all((task, rel) in OPEN for rel in found):
        pytest.xfail("open: " + "; ".join(f"{rel}: {OPEN[task, rel]}" for rel in sorted(found)))
    assert not found, (
        f"{task}'s reference code ships outside its stub in {', '.join(sorted(found))}: put it "
        "inside the task's markers, call the student's code or compare with stored values:\n"
        + "\n".join(f"{rel}: {hits[0]}" for rel, hits in sorted(found.items()))
    )


# "Solutions" made only of what an edition ships (tests/mutants_lookups.py): the stored expected
# values looked up, or the values produced the way the graded tests compute them, without the
# task's technique. Each replaces the task's functions in the instructor's tree; the task's graded
# tests must not all pass.
@pytest.mark.slow
@pytest.mark.parametrize("task", package_tasks())
def test_a_lookup_or_stand_in_fails_the_task(task: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches graded tests that a table of the edition's stored values, or a copy of how the
    tests compute what they expect, passes: every task (every solution block's task in the
    package) has at least one such "solution" in ATTACKS, and with it some graded test of the
    task fails, naming why (a lookup also passes some: it does work where values are stored)."""
    attacks = [a for a in ATTACKS if a.task == task]
    assert attacks, f"no lookup or stand-in of {task} in tests/mutants_lookups.py: add one"
    for attack in attacks:
        lookup = attack.name.startswith("lookup")  # graded whole: some tests must pass
        with monkeypatch.context() as patch:
            results = grade_replaced(task, attack.replacements, patch, attack.message, every=lookup)
        failed = [r for r in results if r.status == "failed"]
        if lookup:
            assert len(failed) < len(results), (
                f"{attack.name} fails every graded test of {task}, even where the edition stores "
                "the values: is it a lookup of them?"
            )
        assert failed, (
            f"{attack.name} ({attack.source}) passes every graded test of {task}: test it at "
            "parameters the edition does not store, or check how the work is done"
        )
        assert named(failed, attack.message), (
            f"{attack.name} fails {task}, but no failure says {attack.message!r}:\n"
            + "\n".join(r.reason for r in failed)
        )


def test_every_attack_targets_a_function_of_its_task() -> None:
    """Guards the attacks: each replaces functions that exist (a renamed one would leave the
    attack unused) and names a task that has solution blocks."""
    tasks = set(package_tasks())
    for attack in ATTACKS:
        assert attack.task in tasks, attack.name
        for target in attack.replacements:
            owner, name = owner_of(target)
            assert callable(getattr(owner, name)), target
