"""The Chinese edition as an instructor releases and grades it: ``release --lang zh_CN`` writes
the labs' text and the README in Chinese and nothing else differently, so its autograder bundle
is the English one, byte for byte but for those, and a submission made from it is graded by the
same tests to the same score
(the task ids, stubs' and graders' messages stay English: they are what a student searches for
and what the score table prints)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
import torch
from test_autograder import LABS, _gradescope, _run_autograder, _submit_instructors_files

from minitorch_dist.course.autograder import REFERENCE_FILE
from minitorch_dist.course.i18n_pages import CJK
from minitorch_dist.course.release import MARKER_FILE, make_release

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    (ROOT / MARKER_FILE).exists(), reason="this is a student release; these check the instructor's"
)


@pytest.fixture(scope="module")
def editions(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Lab 0 released twice to the same URL, in English and in Chinese, with their bundles."""
    base = tmp_path_factory.mktemp("editions")
    out = {"base": base}
    remote = base / "hw0.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    for lang in (None, "zh_CN"):
        name = lang or "en"
        edition, bundle = base / name, base / f"{name}.zip"
        make_release(ROOT, edition, labs=LABS, repo=remote.as_uri(), autograder=bundle, lang=lang)
        out[name] = {"base": base, "edition": edition, "bundle": bundle}
    return out


def _markdown(notebook: Path) -> str:
    cells = json.loads(notebook.read_text())["cells"]
    return "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def _code(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def test_the_chinese_edition_differs_from_the_english_in_its_labs_text_and_readme_alone(
    editions: dict,
) -> None:
    """Catches a Chinese edition whose labs or README are not Chinese, whose code cells or
    README commands differ, or that ships any other file differently (a package file, a test,
    the manifest)."""
    en, zh = editions["en"]["edition"], editions["zh_CN"]["edition"]
    files = {p.relative_to(en) for p in en.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert files == {
        p.relative_to(zh) for p in zh.rglob("*") if p.is_file() and ".git" not in p.parts
    }
    labs = sorted(f for f in files if f.parent == Path("labs") and f.suffix == ".ipynb")
    assert labs
    for rel in labs:
        english, chinese = _markdown(en / rel), _markdown(zh / rel)
        assert len(CJK.findall(chinese)) > len(chinese) / 4, f"{rel}: not in Chinese"
        assert not CJK.findall(english)
        assert _code(en / rel) == _code(zh / rel), f"{rel}: code cells differ"
    english = (en / "README.md").read_text(encoding="utf-8")
    chinese = (zh / "README.md").read_text(encoding="utf-8")
    fenced = re.compile(r"```.*?```", re.S)
    prose = re.sub(r"`[^`]*`", "", fenced.sub("", chinese))  # its words, not its commands
    assert len(CJK.findall(prose)) > len(re.findall("[A-Za-z]", prose)), "README.md: not Chinese"
    assert not CJK.findall(english)
    assert fenced.findall(english) and fenced.findall(chinese) == fenced.findall(english)
    for rel in sorted(files - set(labs) - {Path("README.md")}):
        assert (en / rel).read_bytes() == (zh / rel).read_bytes(), rel


def test_the_chinese_editions_autograder_is_the_english_one(editions: dict) -> None:
    def contents(bundle: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(bundle) as z:
            return {n: z.read(n) for n in z.namelist()}

    en, zh = contents(editions["en"]["bundle"]), contents(editions["zh_CN"]["bundle"])
    assert en.keys() == zh.keys()
    # the course tree it grades on carries the edition's labs and README (their text, not graded)
    text = re.compile(r"course/labs/[^/]+\.ipynb|course/README\.md")
    differ = [n for n in en if en[n] != zh[n] and not text.fullmatch(n)]
    # the reference recordings: the same values (torch.save's zip is not byte-stable)
    assert differ in ([], [REFERENCE_FILE]), f"the bundles differ in {differ}"
    loaded = [torch.load(io.BytesIO(b[REFERENCE_FILE]), weights_only=False) for b in (en, zh)]
    assert _same(*loaded), "the reference recordings differ"


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


@pytest.mark.slow
def test_a_chinese_editions_submission_is_graded_full_marks_and_its_stub_zero(
    editions: dict,
) -> None:
    """The Chinese edition end to end: the instructor's files written into it, zipped by its
    ``submit``, graded by its bundle in Gradescope's layout; its stub scores nothing."""
    course = editions["zh_CN"]
    results = _run_autograder(_gradescope(course, "zh-correct", _submit_instructors_files(course)))
    assert results["score"] == sum(t["max_score"] for t in results["tests"]) == 4
    stub = (course["edition"] / "minitorch_dist" / "comm" / "halves.py").read_text()
    results = _run_autograder(
        _gradescope(course, "zh-stub", {"minitorch_dist/comm/halves.py": stub})
    )
    assert results["score"] == 0 and len(results["tests"]) == 4
    assert all('NotImplementedError("lab00.1' in t["output"] or "lab00.1" in t["output"]
               for t in results["tests"])  # fmt: skip
