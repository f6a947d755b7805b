"""Course mode: the rendered book shows each solution block as its stub, and the check that
scans the built HTML finds any solution line that slipped through."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from minitorch_dist.course.course_book import hide_solutions, solution_lines, solution_lines_in_html

ROOT = Path(__file__).resolve().parent.parent
CODE = textwrap.dedent(
    """\
    def ring(x):
        \"\"\"Docstring stays.\"\"\"
        # BEGIN SOLUTION lab05.1: the ring
        secret_solution_value = x * 2 + 1  # a line long enough to count
        return secret_solution_value
        # END SOLUTION
    """
)


def test_hide_solutions_keeps_the_signature_and_names_the_lab():
    hidden = hide_solutions(CODE)
    assert "secret_solution_value" not in hidden and '"""Docstring stays."""' in hidden
    assert "# you write this in lab 5 (task lab05.1)" in hidden
    assert 'raise NotImplementedError("lab05.1: the ring")' in hidden
    assert hide_solutions("x = 1\n") == "x = 1\n"


def test_an_excerpt_cut_inside_a_block_is_hidden_to_its_end():
    cut = CODE.split("return")[0]  # BEGIN without END, as a :lines: excerpt may give
    assert "secret_solution_value = x" not in hide_solutions(cut)


def test_html_check_finds_a_leak_and_passes_a_clean_page(tmp_path):
    html = tmp_path / "html"
    html.mkdir()
    line = sorted(solution_lines(ROOT))[0]
    escaped = line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    (html / "leak.html").write_text(f'<pre><span class="n">{escaped}</span></pre>')
    (html / "clean.html").write_text("<pre>raise NotImplementedError(...)</pre>")
    assert solution_lines_in_html(ROOT, html) == {"leak.html": [line]}


def test_a_sphinx_build_with_the_extension_shows_the_stub(tmp_path):
    """The extension in a real (tiny) Sphinx build: the included code shows its stub."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "code.py").write_text(CODE)
    (src / "conf.py").write_text('extensions = ["minitorch_dist.course.course_book"]\n')
    (src / "index.rst").write_text(
        "Page\n====\n\n.. literalinclude:: code.py\n   :pyobject: ring\n"
    )
    out = tmp_path / "html"
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(src), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    page = (out / "index.html").read_text()
    assert "secret_solution_value" not in page
    assert "you write this in lab 5" in page
