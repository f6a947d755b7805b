"""Figures say what they show (a description built from titles and axes, or written beside the
code, carried in the PNG and made the image's alt text), and cell outputs in the book hold no
build folder's path."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image

from minitorch_dist.course.book_outputs import (
    describe_images,
    path_forms,
    png_description,
    relative_output_paths,
    relative_paths,
)
from minitorch_dist.course.browser_check_page import undescribed
from minitorch_dist.figures import BookFigure, describe

nodes = pytest.importorskip("docutils.nodes")  # the book's tooling: not in a student's install


def _line_figure() -> BookFigure:
    fig = BookFigure()
    ax = fig.add_subplot()
    ax.plot([1, 2, 3], [3.0, 2.0, 1.5], label="fp32")
    ax.plot([1, 2, 3], [3.1, 2.2, 1.6], label=r"$\mathrm{bf16}$")
    ax.set(xlabel="step", ylabel="loss", title=r"Loss at $t = 4$")
    ax.legend()
    return fig


def test_description_from_title_axes_and_legend():
    assert describe(_line_figure()) == (
        "Line plot of loss against step: Loss at t = 4 (series: fp32, bf16)."
    )


def test_series_whose_names_hold_commas_are_told_apart_by_semicolons():
    fig = BookFigure()
    ax = fig.add_subplot()
    ax.plot([1, 2, 3], [1, 2, 3], label="closed form, none")
    ax.plot([1, 2, 3], [2, 3, 4], label="none")
    ax.set(xlabel="s", ylabel="MiB")
    ax.legend()
    assert describe(fig) == "Line plot of MiB against s (series: closed form, none; none)."


def test_kinds_and_panels():
    fig = BookFigure()
    bars, dots = fig.subplots(1, 2)
    bars.bar(["a", "b"], [1, 2])
    bars.set_ylabel("GiB")
    dots.scatter([1, 2, 3], [3, 1, 2])
    dots.set_xlabel("time (s)")
    fig.suptitle("Memory and time")
    assert describe(fig) == (
        "Memory and time: 2 panels: bar chart of GiB; scatter plot along time (s)."
    )
    heat = BookFigure()
    ax = heat.add_subplot()
    heat.colorbar(ax.imshow([[0, 1], [1, 0]]))
    ax.set_title("who talks to whom")
    assert describe(heat) == "Heat map: who talks to whom."  # the colour bar is no panel
    timeline = BookFigure()
    ax = timeline.add_subplot()
    ax.barh([0, 1], [2, 3], left=[0, 1])
    ax.set(xlabel="time", title="1F1B")
    assert describe(timeline) == "Horizontal bar chart along time: 1F1B."


def test_a_figure_saying_nothing_has_no_description_until_one_is_written():
    fig = BookFigure()
    fig.add_subplot().plot([0, 1, 2], [0, 1, 0])
    assert describe(fig) == "" and fig.description == ""
    assert undescribed(fig.description)  # the browser check fails on such an image
    fig.description = "A tent:   up, then down."
    assert fig.description == "A tent: up, then down."
    assert not undescribed(fig.description, "tent.png")


def test_the_png_carries_the_description(tmp_path):
    fig = _line_figure()
    png = fig._repr_png_()
    assert Image.open(io.BytesIO(png)).text["Description"] == fig.description
    (tmp_path / "f.png").write_bytes(png)
    assert png_description(tmp_path / "f.png") == fig.description
    (tmp_path / "g.svg").write_text("<svg/>")
    assert png_description(tmp_path / "g.svg") == ""
    silent = BookFigure()
    silent.add_subplot()
    assert "Description" not in Image.open(io.BytesIO(silent._repr_png_())).text
    fig.savefig(tmp_path / "saved.png", dpi=50)  # as the benchmarks save their figures
    assert png_description(tmp_path / "saved.png") == fig.description
    fig.savefig(tmp_path / "saved.svg")  # other formats as matplotlib writes them
    assert (tmp_path / "saved.svg").read_text().startswith("<?xml")


def _app(srcdir: Path, docname: str = "chapters/ch") -> SimpleNamespace:
    return SimpleNamespace(srcdir=str(srcdir), env=SimpleNamespace(docname=docname))


def _doctree() -> nodes.Element:
    return nodes.section()  # the handlers walk any tree of nodes


def test_images_get_the_description_of_their_png_as_alt(tmp_path):
    out = tmp_path / "_build" / "jupyter_execute"
    out.mkdir(parents=True)
    (out / "abc.png").write_bytes(_line_figure()._repr_png_())
    silent = BookFigure()
    silent.add_subplot()
    (out / "def.png").write_bytes(silent._repr_png_())
    doc = _doctree()
    described = nodes.image(uri="/_build/jupyter_execute/abc.png")  # how myst-nb names outputs
    written = nodes.image(uri="/_build/jupyter_execute/abc.png", alt="Written by hand.")
    nothing = nodes.image(uri="/_build/jupyter_execute/def.png")
    doc += [described, written, nothing]
    describe_images(_app(tmp_path), doc)
    assert described["alt"].startswith("Line plot of loss against step")
    assert written["alt"] == "Written by hand."
    assert "alt" not in nothing  # nothing to say: Sphinx's file-name alt, the check fails


def test_paths_relative_to_the_repository(tmp_path):
    root = tmp_path / "me" / "book"
    forms = path_forms([root], home=tmp_path / "me")
    assert forms == [str(root), "~/book"]
    text = (
        f"File {root}/minitorch_dist/tensor_parallel/cost.py:80, in kv_heads_per_rank()\n"
        "File ~/book/minitorch_dist/checks.py:12\n"
        f"cwd {root}, not {root}ish/x\n"
        "File /home/me/.venv/lib/python3.11/site-packages/torch/nn/functional.py:9"
    )
    assert relative_paths(text, forms) == (
        "File minitorch_dist/tensor_parallel/cost.py:80, in kv_heads_per_rank()\n"
        "File minitorch_dist/checks.py:12\n"
        f"cwd ., not {root}ish/x\n"
        "File site-packages/torch/nn/functional.py:9"
    )
    assert path_forms([Path("/")]) == []  # never the file system's root


def test_outputs_in_the_doctree_lose_the_build_folder(tmp_path):
    doc = _doctree()
    tb = f"ValueError Traceback\nFile {tmp_path}/minitorch_dist/x.py:3"
    output = nodes.literal_block(tb, tb, classes=["output", "traceback"])
    code = nodes.literal_block(f"# {tmp_path}", f"# {tmp_path}")  # a cell's source: untouched
    doc += [output, code]
    relative_output_paths(_app(tmp_path), doc)
    assert output.astext() == "ValueError Traceback\nFile minitorch_dist/x.py:3"
    assert code.astext() == f"# {tmp_path}"
