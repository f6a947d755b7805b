"""Make the student edition of the book from this, the instructor's, source.

    python -m minitorch_dist.release DEST                                   # every lab stubbed
    python -m minitorch_dist.release DEST --labs lab05,lab06 --repo URL     # one assignment
    python -m minitorch_dist.release DEST --labs lab05 --repo URL --autograder hw3.zip

Solutions live in the package (and in lab notebooks) between two comments::

    # BEGIN SOLUTION lab01.1: per-rank bytes of params, grads and optimizer states
    ...reference code...
    # END SOLUTION

The release copies the repository to DEST and replaces each block with
``raise NotImplementedError("lab01.1: per-rank bytes of params, grads and optimizer states")`` at
the block's indentation, so signatures, docstrings and input checks stay. Lab notebooks lose
their outputs and have their solution blocks replaced the same way; tests/test_mutants.py (the
reference with one mistake per mutant) and the exercise tests (their worked answers) are left out.

``--labs`` makes one assignment's edition: the chosen labs' tasks are stubbed, so are those of
later labs (not yet assigned), and earlier labs keep their reference code (markers removed), as a
course releases one assignment at a time on top of the last. ``--repo`` points every install
cell, launch button and link of the edition at the edition's own repository, and the edition's
README says what a student does. DEST is a git repository with one commit on ``main`` (remote
``origin`` = URL: https, ssh or file), ready to ``git push -u origin main``; its
``submission.json`` lists the package files that hold the assignment's stubs, which
``python -m minitorch_dist.submit`` zips for Gradescope. ``--autograder ZIP`` writes the
Gradescope autograder bundle for the same assignment (minitorch_dist/course/autograder.py). Nothing is
kept by hand: the
student edition is always generated, and the test suite checks that in it the package imports and
every graded test fails with NotImplementedError.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from .edition import (
    _SKIP_DIRS,
    MANIFEST_FILE,
    _source_files,
    check_environment,
    check_repo_url,
    commit_edition,
    student_readme,
    write_manifest,
)
from .markers import BEGIN, END, TASK, SolutionBlockError, _strip_notebook, strip_solutions
from .repository import repository_url

__all__ = [
    "MANIFEST_FILE",
    "MARKER_FILE",
    "SolutionBlockError",
    "make_release",
    "strip_solutions",
    "student_readme",
]

MARKER_FILE = ".student_release"  # present at the root of every generated student edition
_BEGIN, _TASK, _END = BEGIN, TASK, END  # minitorch_dist.course.markers
_THIS = Path(__file__).resolve()  # the tool itself: its docstring shows the markers
# Files the edition leaves out: the mutants are the reference solutions with one mistake each,
# the exercise tests hold the exercises' worked answers, and the search for reference code in an
# edition (test_no_reference.py) holds samples of it and runs only on the instructor's tree.
_INSTRUCTOR_ONLY = (
    "tests/test_mutants.py",
    "tests/mutants_*.py",
    "tests/test_*exercises.py",
    "tests/test_no_reference.py",
)
SOURCE_REPO = repository_url()  # _config.yml's repository.url; --repo replaces it
_LAB = re.compile(r"^lab\d\d$")
_TEXT_SUFFIXES = {".ipynb", ".md", ".yml", ".toml", ".py", ".txt", ".cfg"}


def _keep_rule(labs: Sequence[str] | None) -> Callable[[str], bool] | None:
    """Which tasks keep their reference code: those of labs before the last chosen one that
    were not chosen (None, every lab stubbed, without ``labs``)."""
    if labs is None:
        return None
    labs = sorted(set(labs))
    bad = [lab for lab in labs if not _LAB.match(lab)]
    if bad or not labs:
        raise ValueError(f"labs must be names like lab05, got {list(labs)!r}")
    return lambda task: task[:5] not in labs and task[:5] < labs[-1]


def make_release(
    root: str | os.PathLike,
    dest: str | os.PathLike,
    force: bool = False,
    *,
    labs: Sequence[str] | None = None,
    repo: str | None = None,
    autograder: str | os.PathLike | None = None,
    commit: bool = True,
    lang: str | None = None,
) -> dict:
    """Write the student edition of the repository at ``root`` into ``dest``.

    Returns ``{task id: number of stubbed blocks}``. ``dest`` must not exist unless ``force``.
    ``labs`` (e.g. ``["lab05"]``): stub those labs and later ones, keep earlier labs' reference
    code. ``repo``: the edition's repository URL (https, ssh or file), written wherever the
    source's URL appears and set as the edition's ``origin``. ``commit``: make ``dest`` a git
    repository with one commit. ``autograder``: also write Gradescope's bundle to that zip.
    ``lang`` (``"zh_CN"``): the labs' text and the README in that language, from its catalogues
    (:func:`minitorch_dist.course.i18n.lab_twin`, ``edition.po``); code, task ids, stubs' and
    graders' messages stay as they are.
    """
    keep = _keep_rule(labs)
    source_repo = repository_url(root)  # the address the source's files name
    if repo is not None:
        repo = check_repo_url(repo)
    root, dest = Path(root).resolve(), Path(dest).resolve()
    if (root / MARKER_FILE).exists():
        raise ValueError(f"{root} is already a student release; release from the instructor source")
    if dest == root or root in dest.parents:
        raise ValueError(f"dest={dest} must lie outside the source tree {root}")
    if dest.exists() and not force:
        raise ValueError(f"dest={dest} already exists (pass force=True / --force to replace)")
    if autograder is not None and Path(autograder).resolve() in (root, dest):
        raise ValueError(f"autograder={autograder} must be a zip file's path")
    check_environment(autograder is not None)
    if dest.exists():
        shutil.rmtree(dest)
    zip_existed = autograder is not None and Path(autograder).exists()
    try:
        return _write_release(root, dest, keep, labs, repo, source_repo, autograder, commit, lang)
    except BaseException:  # a failed release leaves nothing behind
        shutil.rmtree(dest, ignore_errors=True)
        if autograder is not None and not zip_existed:
            Path(autograder).unlink(missing_ok=True)
        raise


def _write_release(
    root: Path,
    dest: Path,
    keep: Callable[[str], bool] | None,
    labs: Sequence[str] | None,
    repo: str | None,
    source_repo: str,
    autograder: str | os.PathLike | None,
    commit: bool,
    lang: str | None = None,
) -> dict:
    counts: dict[str, int] = {}
    files_of: dict[str, set[str]] = {}  # task -> package files holding its stub
    for src in _source_files(root):
        rel = src.relative_to(root)
        if (rel.parts and rel.parts[0] in _SKIP_DIRS) or any(
            rel.match(p) for p in _INSTRUCTOR_ONLY
        ):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
        if lang and rel.parent.as_posix() == "labs" and rel.suffix == ".ipynb":
            _translate_lab(src, target, lang)
        if repo is not None and target.suffix in _TEXT_SUFFIXES and src != _THIS:
            text = target.read_text()
            if source_repo in text:
                target.write_text(text.replace(source_repo, repo.rstrip("/")))
        if target.suffix == ".py" and rel.parts[0] == "minitorch_dist" and src != _THIS:
            new, tasks = strip_solutions(target.read_text(), str(rel), keep)
            target.write_text(new)
            for t in tasks:
                files_of.setdefault(t, set()).add(rel.as_posix())
        elif target.suffix == ".ipynb":
            tasks = _strip_notebook(target, keep)
        else:
            continue
        for t in tasks:
            counts[t] = counts.get(t, 0) + 1
    (dest / MARKER_FILE).write_text(
        "Student edition generated by `python -m minitorch_dist.release`.\n"
        "Tasks to implement: " + ", ".join(sorted(counts)) + "\n"
    )
    chosen = sorted(set(labs)) if labs else sorted({t[:5] for t in counts})
    manifest = write_manifest(dest, chosen, files_of)
    in_notebooks = sorted(t for t in counts if t[:5] in chosen and t not in files_of)
    (dest / "README.md").write_text(
        student_readme(counts, labs, repo or source_repo, notebook_tasks=in_notebooks, lang=lang),
        encoding="utf-8",  # a Chinese README whatever the locale
    )
    if commit:
        commit_edition(dest, repo)
    if autograder is not None:
        from .autograder import write_bundle

        write_bundle(root, dest, manifest, autograder)
    return dict(sorted(counts.items()))


def _translate_lab(src: Path, target: Path, lang: str) -> None:
    """The lab's twin in ``lang`` (Markdown translated, code as it is) in place of the lab."""
    import nbformat

    from .catalogues import lab_twin

    if not (src.parents[1] / "locales" / lang).is_dir():
        raise ValueError(f"lang={lang!r}: no catalogues in locales/{lang}/")
    nb, _, _ = lab_twin(src, lang, deeper=False)  # an untranslated message stays English
    nbformat.write(nb, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", help="folder to write the student edition into")
    parser.add_argument(
        "--source",
        default=Path(__file__).resolve().parents[2],
        help="instructor repository (default: the one this package lives in)",
    )
    parser.add_argument("--force", action="store_true", help="replace dest if it exists")
    parser.add_argument("--labs", help="this assignment's labs, e.g. lab05,lab06 (default: all)")
    parser.add_argument(
        "--repo", help="the edition's repository URL: https, ssh or file (install cells, origin)"
    )
    parser.add_argument("--autograder", help="also write Gradescope's autograder zip here")
    parser.add_argument(
        "--lang",
        help="the labs' text and README in this language, e.g. zh_CN (code, messages unchanged)",
    )
    args = parser.parse_args(argv)
    labs = [lab.strip() for lab in args.labs.split(",")] if args.labs else None
    try:
        counts = make_release(
            args.source,
            args.dest,
            force=args.force,
            labs=labs,
            repo=args.repo,
            autograder=args.autograder,
            lang=args.lang,
        )
    except (ValueError, SolutionBlockError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"student edition written to {args.dest} (a git repository, one commit on main)")
    if args.repo:
        print(f"  publish it: cd {args.dest} && git push -u origin main")
    if args.autograder:
        print(f"  Gradescope autograder: {args.autograder} (upload it as the assignment's zip)")
        with zipfile.ZipFile(args.autograder) as z:
            graded = json.loads(z.read(MANIFEST_FILE))["tests"]
        points: dict[str, int] = {}
        for test in graded.values():
            points[test["task"]] = points.get(test["task"], 0) + 1
        print(
            "  points per task (one per graded test): "
            + ", ".join(f"{task} {n}" for task, n in sorted(points.items()))
        )
    for task, n in counts.items():
        print(f"  {task}: {n} block(s) stubbed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
