"""Chapter 12's published runs (``minitorch_dist.planner.published``): for each, the full search
the chapter's table needs, of which it keeps three things: the published layout's rank among the
configurations that fit, how many fit, and the planner's own choice. The fourteen searches take
about seventy seconds of one CPU core, so the chapter reads them from this script's table
(``recorded_verdict`` plans the two rows again, each alone, in milliseconds) and runs one full
search again, which must give the table's row; so a change of the planner that moves a rank
fails the book's build until this script is run again:

    python benchmarks/published_verdicts.py --out benchmarks/results/cpu-2core_published_verdicts.md

The planner is pure Python arithmetic: the table is the same on every machine.
"""

from __future__ import annotations

import argparse
import platform
from dataclasses import asdict

from common import emit, markdown_table

from minitorch_dist.planner import PUBLISHED, ParallelConfig, evaluate_published
from minitorch_dist.progress import progress

HEADING = "Published runs under the planner"
FIELDS = tuple(asdict(ParallelConfig()))  # the choice's fields, one column each


def rows() -> list[dict[str, object]]:
    """One dict per published run: its label, rank, fitting count and the choice's fields."""
    out = []
    for run in progress(PUBLISHED, desc="published runs"):
        v = evaluate_published(run)
        out.append(
            {"run": run.label, "rank": v.rank, "fitting": v.fitting, **asdict(v.best.config)}
        )
    return out


def markdown(table: list[dict[str, object]]) -> str:
    columns = ["run", "rank", "fitting", *FIELDS]
    lines = [
        "# The planner on published training runs (chapter 12)",
        "",
        f"Python {platform.python_version()}; `evaluate_published` on each run of `PUBLISHED`:",
        "the published layout's rank among the fitting configurations (`None`: it does not fit),",
        "how many fit, and the fields of the planner's choice (`recorded_verdict` reads them).",
        "",
        f"## {HEADING}",
        "",
    ]
    cells = [[str(r[c]) for c in columns] for r in table]
    return "\n".join(lines + markdown_table(columns, cells)) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the table as Markdown here")
    args = parser.parse_args()
    emit(markdown(rows()).removesuffix("\n"), args.out)


if __name__ == "__main__":
    main()
