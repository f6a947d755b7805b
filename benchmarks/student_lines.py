"""How much of the package a student must read for the labs: the lines of the files that
ARCHITECTURE.md lists for the labs ("What a student opens, lab by lab": the files holding a lab's
solution blocks and the given code they call), against every line of ``minitorch_dist/``.

The file list is the one ARCHITECTURE.md holds now; ``--before`` counts the same paths as they
were at an older commit (the share a student would have read then, had the list existed), so
the two numbers differ only by what moved out of those files or into the package.

    python benchmarks/student_lines.py --before 028cf91 \
        --out benchmarks/results/cpu-2core_student_lines.md
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## What a student opens, lab by lab"


def lab_files(architecture: str) -> dict[int, tuple[list[str], list[str]]]:
    """{lab: (writes, reads)}: paths under ``minitorch_dist/``, from ARCHITECTURE.md's table."""
    section = architecture.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            writes, reads = (re.findall(r"`([^`]+)`", c) for c in cells[1:])
            rows[int(cells[0])] = (writes, reads)
    return rows


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def package_lines(rev: str | None) -> dict[str, int]:
    """{path under minitorch_dist/: lines} of every ``.py`` file, at ``rev`` (None: the tree)."""
    if rev is None:
        return {
            p.relative_to(ROOT / "minitorch_dist").as_posix(): len(p.read_text().splitlines())
            for p in sorted((ROOT / "minitorch_dist").rglob("*.py"))
        }
    paths = _git("ls-tree", "-r", "--name-only", rev, "minitorch_dist/").split()
    return {
        p.removeprefix("minitorch_dist/"): len(_git("show", f"{rev}:{p}").splitlines())
        for p in paths
        if p.endswith(".py")
    }


def count(rows: dict[int, tuple[list[str], list[str]]], lines: dict[str, int]) -> dict[str, int]:
    """Lines written, read, both (each file once), and the package's."""
    writes = {f for w, _ in rows.values() for f in w}
    reads = {f for _, r in rows.values() for f in r} - writes
    return {
        "files": len(writes | reads),
        "writes": sum(lines.get(f, 0) for f in writes),
        "reads": sum(lines.get(f, 0) for f in reads),
        "student": sum(lines.get(f, 0) for f in writes | reads),
        "package": sum(lines.values()),
        "package_files": len(lines),
        "techniques": sum(n for f, n in lines.items() if not f.startswith(("course/", "viz/"))),
    }


def report(rows: dict[int, tuple[list[str], list[str]]], before: str, after: str | None) -> str:
    now = after and _git("rev-parse", "--short", after).strip()
    states = {
        f"at {before}": package_lines(before),
        f"at {now}" if now else "now": package_lines(after),
    }
    out = [
        "# Lines a student reads for the labs",
        "",
        "Device: one 2-core CPU (line counts do not depend on it). The files ARCHITECTURE.md lists",
        "for labs 0 to 12 (written and read), against every `.py` line of `minitorch_dist/`, and",
        "against the package without the course machinery and the widgets (`course/`, `viz/`).",
        "",
        "| state | lab files | lines written | lines read | student's lines | package lines "
        "(files) | share | without course/, viz/ | share |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, lines in states.items():
        c = count(rows, lines)
        out.append(
            f"| {name} | {c['files']} | {c['writes']:,} | {c['reads']:,} | {c['student']:,} | "
            f"{c['package']:,} ({c['package_files']}) | {c['student'] / c['package']:.1%} | "
            f"{c['techniques']:,} | {c['student'] / c['techniques']:.1%} |"
        )
    first, last = states.values()
    out += ["", "## Per lab", "", "| lab | files | lines before | lines after |"]
    out += ["| --- | ---: | ---: | ---: |"]
    for lab, (writes, reads) in sorted(rows.items()):
        files = writes + reads
        was, is_ = (sum(d.get(f, 0) for f in files) for d in (first, last))
        out.append(f"| {lab} | {len(files)} | {was:,} | {is_:,} |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="the commit to compare with")
    parser.add_argument("--after", help="a later commit (default: the working tree)")
    parser.add_argument("--out", help="also write the report here")
    args = parser.parse_args()
    rows = lab_files((ROOT / "ARCHITECTURE.md").read_text())
    text = report(rows, args.before, args.after)
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
