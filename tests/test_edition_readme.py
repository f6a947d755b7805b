"""The student edition's README (minitorch_dist/course/edition.py, edition_readme.py): the English
one exactly as it was before it became translatable templates, and the Chinese one (``release
--lang zh_CN``) from ``locales/zh_CN/LC_MESSAGES/edition.po``, with the English one's commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from minitorch_dist.course.catalogues import check_translation
from minitorch_dist.course.edition import student_readme
from minitorch_dist.course.edition_readme import readme, readme_messages

PO = Path(__file__).parents[1] / "locales" / "zh_CN" / "LC_MESSAGES" / "edition.po"
CJK = re.compile(r"[\u4e00-\u9fff]")
COUNTS = {"lab05.1": 1, "lab05.2": 2, "lab05.3": 1, "lab06.1": 1, "lab06.2": 1, "lab07.1": 1}
REPO = "https://example.org/x/y/"

# student_readme(COUNTS, ["lab06", "lab05"], REPO, notebook_tasks=["lab05.3"]), captured before
# the README became templates (a notebook task, so every conditional sentence is in it)
EXPECTED = """\
# Your edition of the course: lab05, lab06

Your tasks: lab05.1, lab05.2, lab06.1, lab06.2; and the notebook exercises lab05.3, which check themselves in their notebook and carry no points on Gradescope. Each is a function body in the package (`minitorch_dist/`) or in
a lab notebook that raises `NotImplementedError("labNN.k: ...")`: replace the `raise` with your
code. Signatures, docstrings and input checks are given; the chapters explain what to write.

## Set up

```bash
git clone https://example.org/x/y/ && cd y
python3 -m venv .venv && .venv/bin/pip install -e ".[student]"
source .venv/bin/activate    # each new shell: `python` and `jupyter` are the course's
```

That one line installs the package, the grader with its test dependencies, and JupyterLab:
`.venv/bin/jupyter lab labs/` opens the labs. On Linux without an NVIDIA GPU, install the CPU
build of torch first, before that line: `.venv/bin/pip install torch --index-url
https://download.pytorch.org/whl/cpu` (a download of a few hundred MB; the default build brings
several GB of CUDA libraries the labs do not need). With the CPU build the whole install takes
a few minutes.

In Colab, each lab's first cell clones this edition (tests included) into `/content/course`
and installs it in editable mode: edit the package there from the Files pane (your edits apply
to the next cell you run) and grade with `!cd /content/course && python -m minitorch_dist.grade
--task lab05.1`. A Colab runtime is recycled after a while; set `KEEP_IN_DRIVE = True` at the
top of that first cell to keep the course (and your work) in your Google Drive, where the cell
finds it next time.

## Work and check

- Open the lab notebook (`labs/labNN_*.ipynb`) and work through it: it shows what each task
  must do and checks it on small inputs as you go.
- Grade one task while you work: `python -m minitorch_dist.grade --task lab05.1`
- Grade a whole lab: `python -m minitorch_dist.grade --labs lab05 lab06`. The score
  table comes first, one line per failing test; `results.json` holds the details.
- A test that waits on a collective fails after about ten seconds: a rank that never sends
  (or receives a message of the wrong size) is named, with its own error.

## Submit

`python -m minitorch_dist.submit` writes `submission_lab05_lab06.zip` into this folder
(exactly the package files that hold your tasks, listed in `submission.json`) and prints its
path; upload that zip to Gradescope. The notebook exercises (lab05.3) are not part of the submission and not graded on Gradescope: each checks itself in its notebook (`check_answer`). The autograder copies only those files over the course's
own tree and runs the course's graded tests: tests or files of your own change nothing. In
Colab, run `!cd /content/course && python -m minitorch_dist.submit`, then download the zip from
the Files pane (right click, Download) or with `from google.colab import files;
files.download("/content/course/submission_lab05_lab06.zip")`.
"""

NOTE = (
    " The notebook exercises (lab05.3) are not part of the submission and not graded on "
    "Gradescope: each checks itself in its notebook (`check_answer`)."
)
EXERCISES = (
    "; and the notebook exercises lab05.3, which check themselves in their notebook and carry no "
    "points on Gradescope"
)


def _english(**kw: object) -> str:
    args: dict = {"counts": COUNTS, "labs": ["lab06", "lab05"], "repo": REPO}
    return student_readme(**{**args, "notebook_tasks": ["lab05.3"], **kw})


def test_the_english_readme_is_the_one_it_was() -> None:
    assert _english() == EXPECTED
    assert _english(lang=None) == _english(lang="en") == EXPECTED  # no catalogue: English


def test_each_english_variant_is_the_one_it_was() -> None:
    """Without the autograder, without notebook tasks, for all labs, for another repository:
    the README captured before, less or with what changes."""
    before_submit = EXPECTED.split("\n## Submit\n")[0]
    assert _english(autograded=False) == before_submit.replace(
        " and carry no points on Gradescope", ""
    )
    assert _english(notebook_tasks=()) == EXPECTED.replace(EXERCISES, "").replace(NOTE, "").replace(
        "lab05.1, lab05.2, lab06.1", "lab05.1, lab05.2, lab05.3, lab06.1"
    )
    everything = _english(labs=None, notebook_tasks=(), autograded=False)
    assert everything.startswith("# Your edition of the course: lab05, lab06, lab07\n\n")
    assert "Your tasks: lab05.1, lab05.2, lab05.3, lab06.1, lab06.2, lab07.1. Each" in everything
    assert "--labs lab05 lab06 lab07`. The score" in everything
    assert everything.endswith("is named, with its own error.\n") and "Submit" not in everything
    ssh = _english(repo="git@github.com:org/dist.git")
    assert ssh == EXPECTED.replace(f"{REPO} && cd y", "git@github.com:org/dist.git && cd dist")
    # a lab with no task yet: its first task is labNN.1
    assert "--task lab09.1`" in student_readme({}, ["lab09"], REPO)


def _fenced(text: str) -> list[str]:
    return re.findall(r"```.*?```", text, re.S)


def _spans(text: str) -> list[str]:
    """The inline code spans outside fenced blocks, each on one line (the English wraps some)."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return sorted(" ".join(s.split()) for s in re.findall(r"`[^`]+`", prose))


CASES = {
    "notebook-task": {},
    "no-autograder": {"autograded": False},
    "no-notebook-task": {"notebook_tasks": ()},
    "all-labs-ssh": {"labs": None, "repo": "git@github.com:org/dist.git"},
    "notebook-only": {"counts": {"lab05.3": 1}, "labs": ["lab05"]},
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_chinese_readme_is_chinese_with_the_english_commands(case: dict) -> None:
    en, zh = _english(**case), _english(**case, lang="zh_CN")
    prose = re.sub(r"`[^`]*`", "", re.sub(r"```.*?```", "", zh, flags=re.S))
    assert len(CJK.findall(prose)) > 2 * len(re.findall(r"[A-Za-z]", prose)), zh
    assert _fenced(en) and _fenced(zh) == _fenced(en)
    assert _spans(zh) == _spans(en)
    ids = re.compile(r"\blab\d\d(?:\.\d+)?\b|submission_\w+\.zip")
    assert sorted(set(ids.findall(zh))) == sorted(set(ids.findall(en)))
    marks = re.compile(r"^(#+|-) ", re.M)  # the same headings and list items
    assert marks.findall(zh) == marks.findall(en)
    assert ("## 提交" in zh) == ("## Submit" in en)


def _catalogue() -> list:
    from babel.messages.pofile import read_po

    with PO.open("rb") as f:
        return [m for m in read_po(f, locale="zh_CN") if m.id]


def test_the_readmes_catalogue_is_current_and_wholly_translated() -> None:
    messages = _catalogue()
    assert [m.id for m in messages] == readme_messages(), (
        "edition.po is stale: python -m minitorch_dist.course.i18n extract, then translate"
    )
    placeholders = re.compile(r"\{\w+\}")
    for m in messages:
        assert m.string and not m.fuzzy, f"untranslated: {m.id[:70]!r}"
        assert check_translation(m.id, m.string) is None, m.id[:70]
        assert sorted(placeholders.findall(m.id)) == sorted(placeholders.findall(m.string))
        assert CJK.search(m.string), f"not Chinese: {m.string[:70]!r}"


def test_an_untranslated_or_broken_message_stays_english() -> None:
    values = {"labs": "lab05", "lab_args": "lab05", "first": "lab05.1", "repo": REPO,
              "name": "y", "zip": "submission_lab05.zip", "manifest": "submission.json"}  # fmt: skip
    kw: dict = {"tasks": ["lab05.1"], "exercises": [], "notebook_tasks": [], "autograded": True}
    english = readme(values, **kw)
    assert readme(values, **kw, translations={"Submit": "提交"}) == english.replace(
        "## Submit", "## 提交"
    )
    lost = {"Your tasks: {tasks}": "你的任务", "Submit": "`提交`"}  # a placeholder, a code span
    assert readme(values, **kw, translations=lost) == english
