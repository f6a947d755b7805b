"""The student edition's README in words that a catalogue can translate (for
:func:`minitorch_dist.course.edition.student_readme`).

The README is written here as its English templates, with named placeholders (``{first}``,
``{labs}``, ``{repo}``, ``{name}``, ``{zip}``, ...). Each heading, paragraph and list item of a
template is a message of the catalogue ``locales/<language>/LC_MESSAGES/edition.po`` (its words on
one line: the template's line breaks are the English layout, not part of the message); a fenced
code block is no message and is the same in every language. A message is translated first and
its placeholders filled after, so a translation moves a task id or a URL as the sentence needs;
a message without a translation, or with one that loses a placeholder or a code span, stays
English (with the English line breaks, so the English README is what it always was).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

README = "edition"  # the README's catalogue: locales/<language>/LC_MESSAGES/edition.po

_TASKS = "Your tasks: {tasks}"
_TASKS_AND_EXERCISES = (
    "Your tasks: {tasks}; and the notebook exercises {exercises}, which check themselves in their "
    "notebook"
)
_TASKS_AND_UNGRADED_EXERCISES = _TASKS_AND_EXERCISES + " and carry no points on Gradescope"
_NOTEBOOK_NOTE = (
    "The notebook exercises ({notebook_tasks}) are not part of the submission and not graded on "
    "Gradescope: each checks itself in its notebook (`check_answer`)."
)

_BODY = """# Your edition of the course: {labs}

{your_tasks}. Each is a function body in the package (`minitorch_dist/`) or in
a lab notebook that raises `NotImplementedError("labNN.k: ...")`: replace the `raise` with your
code. Signatures, docstrings and input checks are given; the chapters explain what to write.

## Set up

```bash
git clone {repo} && cd {name}
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
--task {first}`. A Colab runtime is recycled after a while; set `KEEP_IN_DRIVE = True` at the
top of that first cell to keep the course (and your work) in your Google Drive, where the cell
finds it next time.

## Work and check

- Open the lab notebook (`labs/labNN_*.ipynb`) and work through it: it shows what each task
  must do and checks it on small inputs as you go.
- Grade one task while you work: `python -m minitorch_dist.grade --task {first}`
- Grade a whole lab: `python -m minitorch_dist.grade --labs {lab_args}`. The score
  table comes first, one line per failing test; `results.json` holds the details.
- A test that waits on a collective fails after about ten seconds: a rank that never sends
  (or receives a message of the wrong size) is named, with its own error."""

_SUBMIT = """## Submit

`python -m minitorch_dist.submit` writes `{zip}` into this folder
(exactly the package files that hold your tasks, listed in `{manifest}`) and prints its
path; upload that zip to Gradescope.{notebook_note} The autograder copies only those files over the course's
own tree and runs the course's graded tests: tests or files of your own change nothing. In
Colab, run `!cd /content/course && python -m minitorch_dist.submit`, then download the zip from
the Files pane (right click, Download) or with `from google.colab import files;
files.download("/content/course/{zip}")`."""

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _words(text: str) -> str:
    """A template's text as its message: the words on one line."""
    return " ".join(text.split())


def _blocks(template: str) -> list[tuple[str, list[str]]]:
    """A template's blocks, each (its Markdown prefix, its texts): ``("```", [block])`` for a
    fenced code block (no message), ``("## ", [heading])``, ``("- ", items)`` for a list and
    ``("", [paragraph])``."""
    out = []
    for block in template.split("\n\n"):
        if block.startswith("```"):
            out.append(("```", [block]))
        elif block.startswith("#"):
            hashes = block.split(" ", 1)[0]
            out.append((hashes + " ", [block[len(hashes) + 1 :]]))
        elif block.startswith("- "):
            out.append(("- ", block[2:].split("\n- ")))
        else:
            out.append(("", [block]))
    return out


def readme_messages() -> list[str]:
    """Every message of the README in the order it shows them (the catalogue ``edition.po``):
    its headings, paragraphs and list items, and the sentences that depend on the edition."""

    def of(template: str) -> list[str]:
        return [t for prefix, texts in _blocks(template) if prefix != "```" for t in texts]

    texts = [*of(_BODY), _TASKS, _TASKS_AND_EXERCISES, _TASKS_AND_UNGRADED_EXERCISES]
    texts += [*of(_SUBMIT), _NOTEBOOK_NOTE]
    return list(dict.fromkeys(_words(t) for t in texts))


def _usable(msgid: str, msgstr: str | None) -> bool:
    """A translation keeps its English's placeholders, code spans and link targets."""
    from .catalogues import check_translation

    return bool(msgstr) and (
        set(_PLACEHOLDER.findall(msgid)) == set(_PLACEHOLDER.findall(msgstr))
        and check_translation(msgid, msgstr) is None
    )


def _render(template: str, say: Callable[[str], str], values: dict[str, str]) -> str:
    def fill(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)

    out = []
    for prefix, texts in _blocks(template):
        if prefix == "```":
            out.append(fill(texts[0]))
        elif prefix == "- ":
            out.append("- " + "\n- ".join(fill(say(t)) for t in texts))
        else:
            out.append(prefix + fill(say(texts[0])))
    return "\n\n".join(out)


def readme(
    values: dict[str, str],
    tasks: Sequence[str],
    exercises: Sequence[str],
    notebook_tasks: Sequence[str],
    autograded: bool,
    translations: dict[str, str] | None = None,
) -> str:
    """The README for ``values`` (``labs``, ``lab_args``, ``first``, ``repo``, ``name``, ``zip``,
    ``manifest``): ``tasks`` in the package, ``exercises`` (the chosen notebook tasks) and all
    ``notebook_tasks``; in the language of ``translations`` (English message -> translation)."""
    known = translations or {}

    def translated(text: str) -> bool:
        return _usable(_words(text), known.get(_words(text)))

    def say(text: str) -> str:
        return known[_words(text)] if translated(text) else text

    def fill(text: str, **more: str) -> str:
        return _render(text, say, {**values, **more})

    if exercises and tasks:
        task_line = _TASKS_AND_UNGRADED_EXERCISES if autograded else _TASKS_AND_EXERCISES
    else:
        task_line = _TASKS
    your_tasks = fill(
        task_line,
        tasks=", ".join(tasks or exercises),
        exercises=", ".join(exercises),
    )
    text = fill(_BODY, your_tasks=your_tasks) + "\n"
    if autograded:
        note = ""
        if notebook_tasks:
            # an English sentence follows the one before it after a space, a Chinese one not
            note = fill(_NOTEBOOK_NOTE, notebook_tasks=", ".join(notebook_tasks))
            note = note if translated(_NOTEBOOK_NOTE) else " " + note
        text += "\n" + fill(_SUBMIT, notebook_note=note) + "\n"
    return text
