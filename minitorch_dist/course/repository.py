"""The repository's address: one setting, ``repository.url`` in ``_config.yml``.

Jupyter Book reads it for the book's repository, issue and launch buttons. Everything else
that names the repository follows it:

- each lab's Colab install cell (``REPO = "..."`` in the lab's first code cell), and through
  lab 0's cell the Colab twins of the chapters (``colab/chapters/``);
- the clone line of the README and of chapter 0, the README's link to the published site
  (GitHub Pages: ``https://OWNER.github.io/NAME/``), and ``CITATION.cff``;
- the student edition: ``python -m minitorch_dist.release --repo URL`` replaces this address
  with the edition's wherever it appears.

To publish under another name, change ``repository.url`` in ``_config.yml`` and run
``python -m minitorch_dist.book_links``: it rewrites the followers (:func:`follow`) and the
Colab twins. ``tests/test_publish.py`` fails while any of them names another address.
Standard library only: the release imports it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "_config.yml"
# Text files that name the repository; the Colab twins are regenerated from lab 0's cell.
FOLLOWERS = ("README.md", "chapters/00_how_to_run.md", "CITATION.cff")
LABS = "labs/*.ipynb"

_CONFIG_URL = re.compile(
    r"^repository:[ \t]*\n(?:[ \t]+.*\n|[ \t]*\n)*?[ \t]+url:[ \t]*(\S+)", re.M
)
_GITHUB = re.compile(r"^https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?$")
_REPO_LINE = re.compile(r'^([ \t]*REPO = )"([^"]*)"', re.M)  # in a lab's install cell
_JSON_REPO_LINE = re.compile(r'^([ \t]*"[ \t]*REPO = \\")([^"\\]*)(\\")', re.M)  # the same, as JSON
_CFF = re.compile(r'^repository-code:[ \t]*"?([^"\s]+)', re.M)  # CITATION.cff
_CLONE = re.compile(r"git clone ((?:https|ssh|file)://[^\s\"'{}]+|[\w.-]+@[\w.-]+:[^\s\"'{}]+)")


def repository_url(root: Path = ROOT) -> str:
    """``repository.url`` of ``root``'s ``_config.yml``, without a trailing slash."""
    text = (Path(root) / CONFIG).read_text(encoding="utf-8")
    match = _CONFIG_URL.search(text)
    if match is None:
        raise ValueError(f"{Path(root) / CONFIG} has no repository: url: setting")
    return match.group(1).strip("'\"").rstrip("/")


def pages_url(url: str) -> str:
    """Where GitHub Pages publishes the book of the GitHub repository ``url``."""
    match = _GITHUB.match(url)
    if match is None:
        raise ValueError(f"not a GitHub repository address: {url!r}")
    owner, name = match.groups()
    return f"https://{owner.lower()}.github.io/{name}/"


def folder(url: str) -> str:
    """The folder ``git clone url`` makes."""
    return url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".git")


def install_cell(notebook: dict) -> dict:
    """The first code cell of a lab notebook: its Colab install cell."""
    return next(c for c in notebook["cells"] if c["cell_type"] == "code")


def lab_repo(notebook: dict) -> str | None:
    """The address the lab's install cell clones (``REPO = "..."``), or None."""
    match = _REPO_LINE.search("".join(install_cell(notebook)["source"]))
    return match.group(2) if match else None


def named_addresses(root: Path = ROOT) -> dict[str, set[str]]:
    """Every file that follows the setting, with the repository addresses it names."""
    root = Path(root)
    found = {}
    for path in sorted(root.glob(LABS)):
        url = lab_repo(json.loads(path.read_text(encoding="utf-8")))
        found[path.relative_to(root).as_posix()] = {url} if url else set()
    for name in FOLLOWERS:
        text = (root / name).read_text(encoding="utf-8")
        found[name] = {*_CLONE.findall(text), *_CFF.findall(text)}
        found[name] |= {m[1] for m in _REPO_LINE.findall(text)}
    return found


def follow(root: Path = ROOT) -> list[Path]:
    """Rewrite every follower that names another address than ``_config.yml``'s; return them.

    A lab changes only in its install cell's ``REPO = "..."`` line (the notebook's text is edited
    in place, so its JSON layout and stored outputs stay as they are). In the README and chapter 0
    each old address, its GitHub Pages address and ``cd`` into its folder are replaced."""
    root = Path(root)
    url = repository_url(root)
    old = {u for urls in named_addresses(root).values() for u in urls} - {url}
    changed = []
    for path in sorted(root.glob(LABS)):
        text = path.read_text(encoding="utf-8")
        if lab_repo(json.loads(text)) != url:
            _write_lab(path, text, url)
            changed.append(path)
    for name in FOLLOWERS:
        path = root / name
        text = new = path.read_text(encoding="utf-8")
        for u in old:
            new = new.replace(u, url)
            new = re.sub(rf"\bcd {re.escape(folder(u))}\b", f"cd {folder(url)}", new)
            if _GITHUB.match(u) and _GITHUB.match(url):
                new = new.replace(pages_url(u), pages_url(url))
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def _write_lab(path: Path, text: str, url: str) -> None:
    """Point the lab's install cell at ``url``, editing the line in the notebook's own text."""
    if re.search(r'["\\\s]', url):
        raise ValueError(f"a repository address has no quotes, backslashes or spaces: {url!r}")
    new = _JSON_REPO_LINE.sub(lambda m: m.group(1) + url + m.group(3), text, count=1)
    if lab_repo(json.loads(new)) != url:
        raise ValueError(f"{path}: its install cell has no REPO line to point at {url}")
    path.write_text(new, encoding="utf-8")
