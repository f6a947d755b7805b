"""The reader of committed benchmark results (minitorch_dist.results)."""

from __future__ import annotations

import pytest

from minitorch_dist.course.results import (
    RESULTS_DIR,
    bold_figures,
    device_of,
    result_path,
    table_rows,
)


def test_reads_every_bold_ratio_in_file_order(tmp_path, monkeypatch) -> None:
    """Catches a reader that takes only the first figure or one from the wrong line."""
    (tmp_path / "cpu-2core_demo.md").write_text(
        "# demo\n- ours / torch step time: **0.88** (goal met)\n- other: **9.99**\n"
        "## bigger\n- ours / torch step time: **1.14**\n"
    )
    monkeypatch.setattr("minitorch_dist.course.results.RESULTS_DIR", tmp_path)
    assert bold_figures("cpu-2core_demo", "ours / torch step time") == [0.88, 1.14]
    assert device_of("cpu-2core_demo") == "a 2-core CPU without a GPU"
    with pytest.raises(ValueError, match="no line"):
        bold_figures("cpu-2core_demo", "missing")
    with pytest.raises(FileNotFoundError, match="no benchmark result 'absent'"):
        result_path("absent")


def test_committed_results_name_their_device() -> None:
    """Every committed result says where it was measured, so a chapter can say it too."""
    names = sorted(p.stem for p in RESULTS_DIR.glob("*.md"))
    assert names
    for name in names:
        assert device_of(name)
    assert device_of("h100_ddp_vs_torch_1gpu").startswith("one NVIDIA H100")
    assert bold_figures("cpu-2core_ddp_vs_torch", "bucketed / torch DDP step time")


def test_reads_the_table_under_a_heading(tmp_path, monkeypatch) -> None:
    """Catches reading the first table of the file instead of the one under the heading."""
    (tmp_path / "h100_demo.md").write_text(
        "<!-- Device: one NVIDIA H100 80GB HBM3 (lent) -->\n### CPU\n\n| | a |\n|---|---:|\n"
        "| x | 1 |\n\n### CUDA, bf16\n\n| | a |\n|---|---:|\n| x | 2 |\n| y | 3 |\n"
    )
    monkeypatch.setattr("minitorch_dist.course.results.RESULTS_DIR", tmp_path)
    assert table_rows("h100_demo", "CUDA") == [{"": "x", "a": "2"}, {"": "y", "a": "3"}]
    assert device_of("h100_demo") == "one NVIDIA H100 80GB HBM3"
    with pytest.raises(ValueError, match="no heading"):
        table_rows("h100_demo", "TPU")
