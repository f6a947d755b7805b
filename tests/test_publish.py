"""The repository as a newcomer meets it, and as it is published.

Catches a file that names another repository address than ``_config.yml``'s (a lab's Colab
cell, a Colab twin, the README, chapter 0, CITATION.cff), a generator that cannot follow a new
address, a publishing workflow or CI script that no longer runs the README's commands, a README
that grew past a page or lost a chapter, a page that tells readers another way to check their
work than the grader, and benchmark tables out of date with their result files.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from minitorch_dist.course import repository
from minitorch_dist.course.repository import (
    follow,
    lab_repo,
    named_addresses,
    pages_url,
    repository_url,
)

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
LABS = sorted((ROOT / "labs").glob("lab*.ipynb"))
URL = repository_url()


def _readme_command(word: str) -> str:
    """The README's ``python3 -m minitorch_dist.make WORD`` command, from its code blocks."""
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", README, re.S))
    found = re.findall(rf"^(python3 -m minitorch_dist\.make {word})\b", blocks, re.M)
    assert len(found) == 1, f"the README must give one `make {word}` command, got {found}"
    return found[0]


# -- one setting for the repository's address --------------------------------------------------


def test_the_setting_is_read_from_config():
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert URL == config["repository"]["url"].rstrip("/")
    assert (
        pages_url("https://github.com/Some-Org/some.book")
        == "https://some-org.github.io/some.book/"
    )
    with pytest.raises(ValueError):
        pages_url("https://gitlab.com/a/b")


def test_every_place_names_the_configured_address():
    for path, urls in named_addresses().items():
        assert urls == {URL}, f"{path} names {urls}, _config.yml says {URL}"
    assert len([p for p in named_addresses() if p.startswith("labs/")]) == len(LABS)
    for twin in sorted((ROOT / "colab" / "chapters").glob("*.ipynb")):
        assert lab_repo(json.loads(twin.read_text(encoding="utf-8"))) == URL, twin.name
    from minitorch_dist.course.release import SOURCE_REPO

    assert SOURCE_REPO == URL
    assert pages_url(URL) in README, "the README links to where the book is published"


def test_changing_the_setting_is_one_line(tmp_path):
    """Change _config.yml in a copy and run the generator: every follower follows, and a lab's
    text changes in its REPO line only (its JSON layout and outputs untouched)."""
    for name in ("_config.yml", *repository.FOLLOWERS):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "labs", tmp_path / "labs", ignore=shutil.ignore_patterns(".*"))
    new = "https://github.com/Example-Course/llm-memory"
    config = tmp_path / "_config.yml"
    config.write_text(config.read_text(encoding="utf-8").replace(URL, new), encoding="utf-8")

    changed = follow(tmp_path)

    assert len(changed) == len(LABS) + len(repository.FOLLOWERS)
    for path, urls in named_addresses(tmp_path).items():
        assert urls == {new}, path
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert pages_url(new) in readme and pages_url(URL) not in readme
    assert "cd llm-memory" in readme
    for lab in LABS:
        old, text = lab.read_text(encoding="utf-8"), (tmp_path / "labs" / lab.name).read_text()
        diff = [(a, b) for a, b in zip(old.splitlines(), text.splitlines()) if a != b]
        assert len(diff) == 1 and "REPO = " in diff[0][1], lab.name
    assert follow(tmp_path) == []


# -- the README's commands, in CI and in the publishing workflow --------------------------------


def test_ci_runs_the_readmes_test_command():
    assert _readme_command("test") in (ROOT / ".ci" / "run").read_text()


def test_the_workflow_builds_with_the_readmes_command_and_deploys_pages():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert "main" in triggers["push"]["branches"]
    assert {"pages": "write", "id-token": "write"}.items() <= workflow["permissions"].items()
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]
    runs = [step.get("run", "") for step in build["steps"]]
    uses = {step.get("uses", "").split("@")[0]: step for step in build["steps"]}
    assert any("install" in r and "chromium" in r for r in runs), "the browser check's Chromium"
    assert any(_readme_command("book") in r for r in runs)
    assert uses["actions/upload-pages-artifact"]["with"]["path"] == "_build/html"
    assert deploy["needs"] == "build"
    assert any(s.get("uses", "").startswith("actions/deploy-pages@") for s in deploy["steps"])


# -- what a newcomer reads -----------------------------------------------------------------------


def test_readme_is_a_page_that_lists_every_lab():
    assert len(README.splitlines()) <= 150
    for lab in LABS:
        assert f"(labs/{lab.name})" in README, f"the README's chapter table misses {lab.name}"
    intro = (ROOT / "intro.md").read_text(encoding="utf-8")
    for lab in LABS:
        assert f"labs/{lab.stem}" in intro, f"intro.md's plan misses {lab.stem}"
    for name in ("LICENSE", "LICENSE-text.md", "CITATION.cff", "CONTRIBUTING.md", "instructors.md"):
        assert (ROOT / name).is_file() and f"]({name})" in README, name


def test_license_and_citation():
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text()
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "CC BY 4.0" in (ROOT / "LICENSE-text.md").read_text() and "CC BY 4.0" in README
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert {"message", "title", "authors"} <= cff.keys() and cff["authors"]
    assert cff["repository-code"] == URL and cff["url"] == pages_url(URL)


def _reader_pages() -> dict[str, str]:
    """Every page that tells a reader how to work: chapters, intro, instructors, README, and the
    labs' Markdown cells and printed outputs."""
    pages = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "chapters").glob("*.md")}
    for name in ("intro.md", "instructors.md", "README.md"):
        pages[name] = (ROOT / name).read_text(encoding="utf-8")
    for lab in LABS:
        cells = json.loads(lab.read_text(encoding="utf-8"))["cells"]
        texts = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
        for cell in cells:
            for out in cell.get("outputs", []):
                texts.append("".join(out.get("text", "")))
        pages[lab.name] = "\n".join(texts)
    return pages


def test_one_way_to_check_your_work():
    """The grader, named the same everywhere: no page sends a reader to plain pytest markers."""
    for name, text in _reader_pages().items():
        bad = re.findall(r".{0,30}pytest[^`\n]* -m ['\"]?lab.{0,30}", text)
        assert not bad, f"{name} checks work with pytest -m: {bad}"
    assert "python -m minitorch_dist.grade --task lab05.1" in README


def test_no_dated_runs_or_issue_numbers_in_prose():
    """The pages tests/test_prose_rules.py does not read."""
    for name in ("instructors.md", "benchmarks/README.md", "LICENSE-text.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), f"{name} narrates a dated run"
        assert not re.search(r"\b[Ii]ssues? \d+|#\d+\b", text), f"{name} names an issue number"


# -- benchmarks/README.md ------------------------------------------------------------------------


def _benchmarks_readme():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import readme  # benchmarks/readme.py
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return readme


def test_benchmark_tables_are_generated_from_the_results():
    readme = _benchmarks_readme()
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    assert readme.render(text) == text, "run python benchmarks/readme.py"
    for path in (ROOT / "benchmarks" / "results").iterdir():
        assert f"(results/{path.name})" in text
    lo, hi = readme.make_time_ranges()[("make test", "2.13.0+cpu")][1:]
    assert f"took {lo} to {hi} minutes" in README, "the README's time for make test"


def test_benchmark_tables_follow_a_new_result(tmp_path):
    readme = _benchmarks_readme()
    results = tmp_path / "results"
    shutil.copytree(ROOT / "benchmarks" / "results", results)
    (results / "x_new.md").write_text("# A new measurement\n")
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    assert "| [x_new.md](results/x_new.md) | A new measurement |" in readme.render(text, results)
