"""Cheap static checks of the book's structure; the full strict build runs elsewhere.

    jupyter-book build . -W -n --keep-going     # the real check: executes every notebook

Each test names the mistake it catches before a slow build would: a toc entry without a file
(the strict build fails), a lab the toc forgets (only_build_toc_files drops it silently), a lab
whose first cell is not a `# Title` (it breaks the toctree), a config that lets a failing cell
pass, or a build that needs the network.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")  # PyYAML comes with jupyter-book

ROOT = Path(__file__).resolve().parent.parent
SUFFIXES = (".md", ".ipynb")


def _load(name: str) -> dict:
    with open(ROOT / name, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _toc_files() -> list[str]:
    """Every `root` and `file` entry of _toc.yml, as written (no suffix)."""
    toc = _load("_toc.yml")
    found = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                found.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk({k: v for k, v in toc.items() if k != "root"})
    return found


def _source(entry: str) -> Path | None:
    stem = re.sub(r"\.(md|ipynb)$", "", entry)
    matches = [ROOT / f"{stem}{s}" for s in SUFFIXES if (ROOT / f"{stem}{s}").exists()]
    return matches[0] if len(matches) == 1 else None


def _labs() -> list[Path]:
    return sorted((ROOT / "labs").glob("lab*.ipynb"))


def test_toc_is_a_jupyter_book_toc():
    """Catches a toc in the wrong format (jb-article, or sphinx-external-toc's own)."""
    toc = _load("_toc.yml")
    assert toc["format"] == "jb-book"
    assert toc["root"] == "intro"
    for part in toc.get("parts", []):
        assert part.get("caption"), f"a part without a caption: {part}"
        assert part.get("chapters"), f"part {part['caption']!r} lists no chapters: the build fails"


def test_toc_entries_exist_exactly_once():
    """Catches a toc entry whose file does not exist (or exists as both .md and .ipynb)."""
    entries = _toc_files()
    missing = [e for e in entries if _source(e) is None]
    assert not missing, f"_toc.yml lists files that are missing or ambiguous: {missing}"
    assert len(entries) == len(set(entries)), "_toc.yml lists a file twice"


def test_every_lab_and_chapter_is_in_the_toc():
    """Catches a lab or chapter the toc forgot: only_build_toc_files would skip it silently."""
    listed = {re.sub(r"\.(md|ipynb)$", "", e) for e in _toc_files()}
    pages = _labs() + sorted((ROOT / "chapters").glob("[0-9][0-9]_*.md"))
    forgotten = [p.relative_to(ROOT).with_suffix("").as_posix() for p in pages]
    forgotten = [p for p in forgotten if p not in listed]
    assert not forgotten, f"not in _toc.yml: {forgotten}"


@pytest.mark.parametrize("lab", _labs(), ids=lambda p: p.name)
def test_lab_opens_with_a_title_and_a_colab_cell(lab):
    """Catches a lab that breaks the toctree (no `# Title` first) or cannot run in Colab."""
    nb = json.loads(lab.read_text(encoding="utf-8"))
    cells = nb["cells"]
    first = "".join(cells[0]["source"])
    assert cells[0]["cell_type"] == "markdown", f"{lab.name}: first cell must be markdown"
    assert re.match(r"# \S", first), f"{lab.name}: first cell must start with '# Title'"
    number = re.match(r"lab(\d\d)_", lab.name).group(1)
    assert re.match(rf"# Lab {int(number)}\b", first), (
        f"{lab.name}: title must say 'Lab {int(number)}'"
    )
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert code and '"google.colab" in sys.modules' in code[0], (
        f"{lab.name}: the first code cell must install the package when run in Colab"
    )


@pytest.mark.parametrize("lab", _labs(), ids=lambda p: p.name)
def test_lab_errors_only_in_cells_tagged_raises_exception(lab):
    """Catches a committed lab whose stored outputs hold an error that nobody meant."""
    nb = json.loads(lab.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        errors = [o for o in cell.get("outputs", []) if o["output_type"] == "error"]
        tagged = "raises-exception" in cell.get("metadata", {}).get("tags", [])
        assert not errors or tagged, f"{lab.name} cell {i}: error output without the tag"


NBVAL_TAGS = {"nbval-ignore-output", "nbval-check-output", "nbval-raises-exception", "nbval-skip"}


@pytest.mark.parametrize("lab", _labs(), ids=lambda p: p.name)
def test_lab_nbval_tags_are_ones_nbval_knows(lab):
    """Catches a tag nbval silently ignores (e.g. NBVAL_IGNORE_OUTPUT as a tag: only the comment
    marker is spelled that way), which leaves a timing cell compared and the lab flaky."""
    nb = json.loads(lab.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        for tag in cell.get("metadata", {}).get("tags", []):
            if "nbval" in tag.lower():
                assert tag in NBVAL_TAGS, f"{lab.name} cell {i}: nbval does not know tag {tag!r}"


@pytest.mark.parametrize("chapter", sorted((ROOT / "chapters").glob("*.md")), ids=lambda p: p.name)
def test_chapters_are_executable_myst_notebooks(chapter):
    """Catches a chapter whose code cells would be shown but never run (no kernelspec)."""
    text = chapter.read_text(encoding="utf-8")
    if "```{code-cell}" not in text:
        return
    front = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert front, f"{chapter.name}: code cells need jupytext/kernelspec front matter"
    meta = yaml.safe_load(front.group(1))
    assert meta["kernelspec"]["name"] == "python3"
    assert meta["jupytext"]["text_representation"]["format_name"] == "myst"


def test_config_executes_strictly_and_offline():
    """Catches a config under which a failing notebook still builds, or the build needs a network."""
    cfg = _load("_config.yml")
    execute = cfg["execute"]
    assert execute["execute_notebooks"] in ("force", "cache"), "notebooks must be executed"
    assert execute.get("allow_errors", False) is False
    assert 60 <= execute["timeout"] <= 900  # a cell's hang guard, as nbval's --timeout 900
    sphinx_cfg = cfg.get("sphinx", {}).get("config", {})
    assert sphinx_cfg.get("nb_execution_raise_on_error") is True
    assert not sphinx_cfg.get("intersphinx_mapping"), "intersphinx fetches inventories online"
    assert "sphinx.ext.intersphinx" not in cfg.get("sphinx", {}).get("extra_extensions", [])
    assert not sphinx_cfg.get("suppress_warnings"), "fix the warning's cause instead"
    assert cfg["only_build_toc_files"] is True
    for pattern in (".venv/**", "_build/**", "tests/**", "minitorch_dist/**"):
        assert pattern in cfg["exclude_patterns"]
    assert (ROOT / cfg["bibtex_bibfiles"][0]).exists()


def test_the_book_executes_the_chapters_and_shows_the_labs_outputs():
    """Catches a lab executed a third time by the book (nbval and the determinism pass of
    ``make test`` have run it twice already), or a chapter shown with stale outputs: chapters
    execute on every build; labs show their committed outputs, which nbval checks."""
    from fnmatch import fnmatch

    patterns = _load("_config.yml")["execute"]["exclude_patterns"]
    skipped = lambda path: any(fnmatch(path, p) for p in patterns)  # noqa: E731
    labs = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "labs").glob("lab*.ipynb"))
    chapters = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "chapters").glob("*.md"))
    assert labs and all(skipped(lab) for lab in labs), [lab for lab in labs if not skipped(lab)]
    assert not [chapter for chapter in chapters if skipped(chapter)]


def test_config_has_what_the_colab_button_needs():
    """Catches a missing repository url/branch/path: the launch buttons silently disappear."""
    cfg = _load("_config.yml")
    repo = cfg["repository"]
    assert repo["url"].startswith("https://github.com/")
    assert repo["branch"]
    assert repo["path_to_book"] == ""
    assert cfg["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert cfg["html"]["use_repository_button"] is True


@pytest.mark.parametrize("chapter", sorted((ROOT / "chapters").glob("*.md")), ids=lambda p: p.name)
def test_glue_roles_are_well_formed(chapter):
    """Catches {glue:text}`key:.2f} (a brace for the closing backtick): myst-nb then renders the
    raw role and the rest of the paragraph as code, and the strict build may not say where."""
    text = chapter.read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        for role in re.finditer(r"\{glue(?::\w+)?\}(`[^`\n]*`?)", line):
            body = role.group(1)
            assert body.endswith("`") and len(body) > 2, f"{chapter.name}:{number}: {line.strip()}"
            assert "}" not in body and " " not in body, f"{chapter.name}:{number}: {body}"
