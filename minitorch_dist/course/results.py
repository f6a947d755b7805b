"""Committed benchmark results, read back so a chapter quotes measured figures instead of typing them.

Each file in ``benchmarks/results/`` is Markdown written by a script in ``benchmarks/``; its name
starts with the machine (``cpu-2core_...``, ``h100_...``) and its first lines name the device.
The figures a script reports as a ratio are bold: ``- bucketed / torch DDP step time: **0.88**``.

    >>> bold_figures("cpu-2core_ddp_vs_torch", "bucketed / torch DDP step time")
    [1.06, 0.86, 0.78, 0.81, 1.0, 0.98]

Tables are read by the heading above them: ``table_rows(name, "CUDA, bfloat16")`` returns the
rows of the first table under a heading that starts with those words, as dictionaries keyed by
the column titles.
"""

from __future__ import annotations

import re
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"

_MACHINES = {
    "cpu-2core": "a 2-core CPU without a GPU",
    "h100": "one NVIDIA H100",
    "h200": "one NVIDIA H200",
}


def result_path(name: str) -> Path:
    """The Markdown file ``benchmarks/results/<name>.md``; a clear error if it is missing."""
    path = RESULTS_DIR / f"{name.removesuffix('.md')}.md"
    if not path.is_file():
        known = sorted(p.stem for p in RESULTS_DIR.glob("*.md")) if RESULTS_DIR.is_dir() else []
        raise FileNotFoundError(
            f"no benchmark result {name!r} in {RESULTS_DIR.name}/; known: {known}"
        )
    return path


def device_of(name: str) -> str:
    """The device a result was measured on, in words: the file's ``Device:`` note if it has one,
    else what its name's machine prefix stands for."""
    text = result_path(name).read_text()
    found = re.search(r"Device: (one [^(,.]+?)\s*[(,.]", text)
    if found:
        return found.group(1).strip()
    prefix = result_path(name).stem.split("_")[0]
    if prefix not in _MACHINES:
        known = sorted(_MACHINES)
        raise ValueError(
            f"result {name!r} names no device; its prefix {prefix!r} is not in {known}"
        )
    return _MACHINES[prefix]


def bold_figures(name: str, label: str) -> list[float]:
    """Every bold number on a bullet line of result ``name`` that starts with ``label``, in file
    order (a file with several models reports the same ratio once per model)."""
    pattern = re.compile(rf"^- {re.escape(label)}:\s*\*\*([-+0-9.eE]+)\*\*", re.MULTILINE)
    values = [float(v) for v in pattern.findall(result_path(name).read_text())]
    if not values:
        raise ValueError(f"result {name!r} has no line '- {label}: **...**'")
    return values


def table_rows(name: str, heading: str) -> list[dict[str, str]]:
    """The rows of the first Markdown table under the first heading of result ``name`` that
    starts with ``heading`` (``#`` marks stripped), each a dict from column title to cell text."""
    lines = result_path(name).read_text().splitlines()
    headings = [i for i, line in enumerate(lines) if line.startswith("#")]
    matches = [i for i in headings if lines[i].lstrip("#").strip().startswith(heading)]
    if not matches:
        raise ValueError(f"result {name!r} has no heading starting with {heading!r}")
    table = []
    for line in lines[matches[0] + 1 :]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif table:
            break
    if len(table) < 3:
        raise ValueError(f"result {name!r} has no table under {heading!r}")
    titles = table[0]
    return [dict(zip(titles, row, strict=True)) for row in table[2:]]
