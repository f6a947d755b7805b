"""A figure a later chapter restates is computed there, by the function that derived it.

Issue 30 found three regressions of an earlier review's fixes, each a number retyped into a
later page after the page that derives it had been corrected: fp16's flush to zero (chapter 2),
the offload split (chapter 12, from chapter 6), Llama 3's MFU (chapter 4), and the ZeRO bytes
under accumulation (chapter 12, from chapter 6). Two kinds of checks, on the chapters' MyST
source, no build needed:

- the retyped forms are gone from the prose (the text outside code cells), and from the code
  where a typed constant stood in for the function;
- each restated figure is a ``{glue:text}`` role whose value comes from the named function: the
  code cell that glues it, or a cell that assigns a name the glue reads, calls that function.

Run against the chapters before the fix, the first kind fails on every item of the list.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CHAPTERS = Path(__file__).resolve().parent.parent / "chapters"
CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


def _page(name: str) -> tuple[str, list[str]]:
    """(prose, code cells) of ``chapters/<name>``: prose is everything outside code cells."""
    text = (CHAPTERS / name).read_text(encoding="utf-8")
    cells = CELL.findall(text)
    return CELL.sub("", text), cells


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text)


# (page, where, pattern, the mistake it names); `where` is "prose" or "code"
RETYPED = [
    (
        "02_number_formats.md",
        "prose",
        r"smaller than (\$?2\^\{?-24\}?\$?|2⁻²⁴|\{glue:text\}`fp16_min_sub`) become zero",
        "fp16 flushes values up to half the smallest subnormal to zero, not those below it",
    ),
    (
        "04_gradient_accumulation.md",
        "prose",
        r"\b3[0-9] ?% (BF16 )?MFU|MFU[^.]{0,40}\b3[0-9] ?%",
        "an MFU typed into the prose (38 % is Table 4's long-context row, not the 8K one)",
    ),
    (
        "04_gradient_accumulation.md",
        "code",
        r"flops_per_device=0\.\d+",
        "a typed MFU in the Llama 3 estimate instead of the planner's published row",
    ),
    (
        "04_gradient_accumulation.md",
        "code",
        r"\b3[0-9] ?% (BF16 )?MFU",
        "an MFU typed into the code's comments (38 % is the long-context row)",
    ),
    (
        "04_gradient_accumulation.md",
        "code",
        r"\b989e12\b",
        "a typed H100 peak instead of the cluster preset's",
    ),
    (
        "12_choosing_a_configuration.md",
        "prose",
        r"moves the \$1[24]\\Psi",
        "the offload split typed (12 or 14 bytes per parameter: chapter 6's predict gives it)",
    ),
    (
        "12_choosing_a_configuration.md",
        "prose",
        r"half as much again",
        "stage 3's traffic as 1.5 times stage 2's holds for one micro-batch only",
    ),
    (
        "12_choosing_a_configuration.md",
        "prose",
        r"2\(d - 1\)/d\$ of the 16-bit gradients for ZeRO stages 0 to 2",
        "stage 2 reduce-scatters every micro-batch's gradients: (m + 1)(d - 1)/d, not 2(d - 1)/d",
    ),
]


@pytest.mark.parametrize(
    ("page", "where", "pattern", "mistake"),
    RETYPED,
    ids=[f"{r[0][:2]}-{i}" for i, r in enumerate(RETYPED)],
)
def test_no_retyped_figure(page: str, where: str, pattern: str, mistake: str) -> None:
    prose, cells = _page(page)
    text = _squash(prose) if where == "prose" else "\n".join(cells)
    found = re.search(pattern, text)
    assert found is None, f"{page}: {found.group(0)!r} -- {mistake}"


def _glue_sources(cells: list[str], key: str) -> list[str]:
    """The cells that glue ``key`` and the cells that assign a name its glue call reads."""
    call = re.compile(r"glue\(\s*(?:f?\"" + re.escape(key) + r"\"|(\w+))\s*,(.*)")
    out, names = [], set()
    for cell in cells:
        for line in cell.splitlines():
            found = call.search(line)
            if found and (found.group(1) is None or f'"{key}"' in cell):  # glue(key, ...) in a loop
                out.append(cell)
                names |= set(re.findall(r"[A-Za-z_]\w*", found.group(2)))
    for _ in range(2):  # two levels of assignment: x = f(...); y = x.attr
        more = set()
        for cell in cells:
            for name in list(names):
                hit = re.search(
                    rf"^\s*(?:[\w, ]*,\s*)?{re.escape(name)}\b[\w, ]*=[^=](.*)$", cell, re.M
                )
                if hit:
                    out.append(cell)
                    more |= set(re.findall(r"[A-Za-z_]\w*", hit.group(1)))
        names |= more
    return out


# (page, glue key, function whose result it must be, what it restates)
COMPUTED = [
    ("02_number_formats.md", "fp16_flush", "min_subnormal", "fp16's flush to zero"),
    ("04_gradient_accumulation.md", "l405_mfu", "PUBLISHED", "Llama 3's 8K-row MFU"),
    ("04_gradient_accumulation.md", "l405_days", "training_seconds", "Llama 3's days"),
    ("12_choosing_a_configuration.md", "ours_cpu", "predict", "our offload's CPU bytes"),
    ("12_choosing_a_configuration.md", "zo_cpu", "predict", "ZeRO-Offload's CPU bytes"),
    ("12_choosing_a_configuration.md", "zero2_vs_1", "zero_comm_bytes", "ZeRO-2's traffic"),
    ("12_choosing_a_configuration.md", "zero3_vs_1", "zero_comm_bytes", "ZeRO-3's traffic"),
    (
        "12_choosing_a_configuration.md",
        "a2a_per_step_full",
        "all_to_alls_per_step",
        "the all-to-alls under full recomputation",
    ),
    (
        "10_mixture_of_experts.md",
        "a2a_per_step_full",
        "all_to_alls_per_step",
        "the all-to-alls under full recomputation",
    ),
    (
        "07_tensor_and_sequence_parallelism.md",
        "need_8_per_nic",
        "nic_bandwidth",
        "tensor parallelism's demand against a network port",
    ),
]


@pytest.mark.parametrize(
    ("page", "key", "function", "what"), COMPUTED, ids=[f"{r[0][:2]}-{r[1]}" for r in COMPUTED]
)
def test_restated_figure_is_glued_from_its_function(
    page: str, key: str, function: str, what: str
) -> None:
    prose, cells = _page(page)
    assert f"{{glue:text}}`{key}" in prose, f"{page}: {what} is not a {{glue:text}}`{key}` role"
    sources = _glue_sources(cells, key)
    assert sources, f"{page}: nothing glues {key!r} ({what})"
    assert any(function in cell for cell in sources), (
        f"{page}: {key!r} ({what}) is not computed by {function}"
    )


def test_guard_catches_the_old_sentences() -> None:
    """The patterns match the sentences issue 30 quoted (so the guard can fail)."""
    old = {
        "02": "Gradients smaller than {glue:text}`fp16_min_sub` become zero in fp16.",
        "04": "the run needs about 100 days at 38% MFU",
        "11a": r"Offload moves the $12\Psi_r$ term to CPU memory",
        "11b": "for ZeRO stages 0 to 2 and half as much again for stage 3",
        "11c": r"$2(d - 1)/d$ of the 16-bit gradients for ZeRO stages 0 to 2",
    }
    prose_patterns = [p for _, where, p, _ in RETYPED if where == "prose"]
    for label, sentence in old.items():
        assert any(re.search(p, _squash(sentence)) for p in prose_patterns), label
