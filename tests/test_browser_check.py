"""The real-browser check of the built book: each check catches its defect on a tiny hand-written
site, and a clean site passes. One headless Chromium for the whole module."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from minitorch_dist import browser_check as bc
from minitorch_dist.course import browser_check_live as bcl
from minitorch_dist.course.browser_check_labels import control_failures, shows, text_of

CHROMIUM_MISSING = not Path(bc.CHROMIUM).exists()

WIDGET = """
<div data-live="predictor" data-state="static" data-inputs='{"zero_stage":0,"dp":1}'
     data-result='{"kind":"predictor","total":10010}'>
  <label><span>ZeRO stage</span><select data-control="zero_stage"><option value="0" selected>0</option>
    <option value="1">1</option><option value="3">3</option></select></label>
  <label><span>dp ranks</span><select data-control="dp"><option value="1" selected>1</option>
    <option value="8">8</option></select></label>
  <p class="live-status"></p><div class="live-output">total <b>10,010</b></div>
</div>
"""
# A stand-in for live.js that starts at once and answers nothing.
STARTS = """<script>
for (const box of document.querySelectorAll('[data-live]')) box.setAttribute('data-state', 'ready');
</script>"""
# A stand-in for live.js: starts at once, answers synchronously (no Pyodide) with fake_live's
# arithmetic.
LIVE = (
    STARTS
    + """<script>
for (const box of document.querySelectorAll('[data-live]')) {
  box.addEventListener('change', () => {
    const v = {};
    box.querySelectorAll('select[data-control]').forEach(s => { v[s.dataset.control] = JSON.parse(s.value); });
    box.setAttribute('data-inputs', JSON.stringify(v));
    const total = 1000 * (v.zero_stage + 10) + 10 * v.dp;
    box.setAttribute('data-result', JSON.stringify({kind: 'predictor', total}));
    box.querySelector('.live-output').innerHTML = `total <b>${total.toLocaleString('en-US')}</b>`;
  });
}
</script>"""
)


def fake_live(kind: str, inputs: dict) -> dict:
    return {"kind": kind, "total": 1000 * (inputs["zero_stage"] + 10) + 10 * inputs["dp"]}


def fake_controls(kind: str) -> dict:
    return {"zero_stage": ("ZeRO stage", (0, 1, 3), 0), "dp": ("dp ranks", (1, 8), 1)}


def fake_render(result: dict) -> str:
    return f"total <b>{result['total']:,}</b>"


PICTURE = '<svg xmlns="http://www.w3.org/2000/svg" width="20" height="20"><rect width="20" height="20"/></svg>'
WIDE = PICTURE.replace('"20"', '"600"', 1).replace('width="20"', 'width="600"')
CLEAN = f"""
<h1 id="top">A page</h1>
<p>See <a href="other.html#there">there</a>, <a href="#top">the top</a>, and
<span class="math"><mjx-container>x</mjx-container></span>.</p>
<a href="https://colab.research.google.com/github/org/repo/blob/main/labs/lab.ipynb">Colab</a>
<figure><a href="pic.svg"><img src="pic.svg" alt="A black square on white."></a></figure>
<figure><a href="wide.svg"><img src="wide.svg" style="max-width:100%" alt="A wide black bar."></a></figure>
<table><tr><td>262.8 GiB</td><td>3,381 of 11,593</td></tr></table>
<p>A long path <code>minitorch_dist/data_parallel/profiling.py</code> on a line of its own.</p>
<table><tr><th>method</th><th>bytes</th></tr><tr><td>ring</td><td>12</td></tr></table>
<p>A range |x| - |y| and a 1 - 2 | 3 - 4 | 5 split stay prose.</p>
<div class="cell docutils container"><div class="cell_output docutils container">
  <div class="output stream highlight-myst-ansi notranslate"><pre>line 1\nline 2</pre></div>
  <div class="output stderr highlight-myst-ansi notranslate"><pre>a warning</pre></div>
</div></div>
<div class="cell tag_raises-exception docutils container"><div class="cell_output docutils container">
  <div class="output traceback highlight-ipythontb notranslate"><pre>ValueError: on purpose</pre></div>
</div></div>
<pre>code may say {{glue:}}`x` and $$ and \\begin{{align}}</pre>
{WIDGET}{LIVE}
"""


def write_site(root: Path, body: str, name: str = "page.html") -> tuple[Path, Path]:
    """A one-page html folder (plus other.html and a picture) and a repository with one notebook."""
    html, repo = root / "html", root / "repo"
    (html / Path(name).parent).mkdir(parents=True, exist_ok=True)
    (repo / "labs").mkdir(parents=True, exist_ok=True)
    (repo / "labs" / "lab.ipynb").write_text("{}")
    page = f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><main>{body}</main></body></html>'
    (html / name).write_text(page)
    (html / "other.html").write_text(
        '<html><body><main><p id="there">there</p></main></body></html>'
    )
    (html / "pic.svg").write_text(PICTURE)
    (html / "wide.svg").write_text(WIDE)
    return html, repo


WAIT_MS = 2000  # how long the check waits here for a widget to start or answer (quick_widgets)
NOT_READY = f"not ready {WAIT_MS / 1000:.0f} s after"  # what it says when one does not


@pytest.fixture(autouse=True)
def quick_widgets(monkeypatch):
    # The pages here answer synchronously: two seconds only wait out the ones that never do.
    # 500 ms expired once beside make test's seven other jobs (a load average of 20).
    monkeypatch.setattr(bcl, "READY_TIMEOUT_MS", WAIT_MS)
    monkeypatch.setattr(bcl, "UPDATE_TIMEOUT_MS", WAIT_MS)


@pytest.fixture(scope="module")
def browser():
    pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
    )
    if CHROMIUM_MISSING:
        pytest.skip(f"{bc.CHROMIUM} is missing (sudo apt-get install chromium)")
    with bc.chromium() as b:
        yield b


def check(browser, tmp_path: Path, body: str, name: str = "page.html", live=fake_live) -> list[str]:
    """The failures of a one-page site; ``live`` is Python's answer, beside the fake controls
    and rendering (a bare callable: no controls nor rendering compared)."""
    html, repo = write_site(tmp_path, body, name)
    if callable(live) and not isinstance(live, bcl.Reference):
        live = bcl.Reference(live, fake_controls, fake_render)
    return [f"{page}: {fail}" for page, fail in bc.check_site(html, repo, None, browser, live)]


def only(fails: list[str], needle: str) -> None:
    assert fails and all(needle in f for f in fails), fails


def test_a_clean_page_passes_and_leaves_a_screenshot_and_no_server(browser, tmp_path):
    html, repo = write_site(tmp_path, CLEAN)
    assert bc.check_site(html, repo, tmp_path / "shots", browser, fake_live) == []
    left = [t.name for t in threading.enumerate() if "server" in t.name or "request" in t.name]
    assert left == []  # the server and its handler threads are gone
    assert (tmp_path / "shots" / "page.png").stat().st_size > 1000
    assert (tmp_path / "shots" / "other.png").is_file()
    assert (tmp_path / "shots" / "phone" / "page.png").stat().st_size > 1000  # 390 px wide


def test_split_output_boxes(browser, tmp_path):
    boxes = '<div class="output stream highlight-myst-ansi notranslate"><pre>row</pre></div>' * 5
    body = f"""<div class="cell docutils container"><div class="cell_output docutils container">
        <div class="output text_plain"><pre>1</pre></div></div></div>
        <div class="cell docutils container"><div class="cell_output docutils container">
        {boxes}</div></div>"""
    assert check(browser, tmp_path, body) == [
        "page.html: cell 2: 5 stdout output boxes (one expected)"
    ]


def test_error_output_outside_a_raises_exception_cell(browser, tmp_path):
    body = """<div class="cell docutils container"><div class="cell_output docutils container">
        <div class="output traceback"><pre>RuntimeError: boom</pre></div></div></div>"""
    only(check(browser, tmp_path, body), "cell 1: error output")


def test_colab_button_to_markdown_or_missing_notebook(browser, tmp_path):
    url = "https://colab.research.google.com/github/org/repo/blob/main/"
    body = f'<a href="{url}chapters/01.md">Colab</a><a href="{url}labs/gone.ipynb">Colab</a>'
    assert check(browser, tmp_path, body) == [
        "page.html: Colab button opens chapters/01.md, not a notebook (.ipynb)",
        "page.html: Colab button opens labs/gone.ipynb, which is not in the repository",
    ]


def test_widget_that_never_starts(browser, tmp_path):
    only(check(browser, tmp_path, WIDGET), f"{NOT_READY} scrolling into view")
    error = STARTS.replace("'ready'", "'error'")
    only(check(browser, tmp_path, WIDGET + error), "Python did not start")


def test_widget_driven_from_file_urls_offline(browser, tmp_path):
    """The widgets run in a page opened from file://: one that starts only over http fails, and
    so does one that reaches for the network."""
    http_only = STARTS.replace("for (const", "if (location.protocol !== 'file:') for (const")
    only(check(browser, tmp_path, WIDGET + http_only), f"{NOT_READY} scrolling into view")
    fetching = '<script>fetch("https://cdn.example.org/pyodide.js").catch(() => 0)</script>'
    fails = check(browser, tmp_path, WIDGET + LIVE + fetching)
    assert "page.html: requested https://cdn.example.org/pyodide.js from file://" in fails


def test_widget_without_its_build_time_answer(browser, tmp_path):
    """With scripts off a widget shows what was computed at build time: a page that only has an
    answer once its script ran fails."""
    started = WIDGET.replace('data-state="static"', 'data-state="ready"')
    only(check(browser, tmp_path, started + LIVE), "with scripts off: data-state is 'ready'")
    empty = WIDGET.replace("total <b>10,010</b>", "")
    fails = check(browser, tmp_path, empty + LIVE)
    assert (
        "page.html: live predictor 1 with scripts off: shows no answer (an empty .live-output)"
        in fails
    )


def test_dead_widget(browser, tmp_path):
    only(check(browser, tmp_path, WIDGET + STARTS), f"{NOT_READY} setting zero_stage=")


def test_widget_against_a_wrong_python(browser, tmp_path):
    def wrong(kind: str, inputs: dict) -> dict:
        return {**fake_live(kind, inputs), "total": fake_live(kind, inputs)["total"] + 1}

    fails = check(browser, tmp_path, WIDGET + LIVE, live=wrong)
    only(fails, "the page shows total unlike Python")
    # the first answer, after each of the two changes, and the build-time one with scripts off
    assert len(fails) == 4 and "with scripts off" in fails[-1]


def test_widget_answering_later_is_waited_for(browser, tmp_path, monkeypatch):
    monkeypatch.setattr(bcl, "UPDATE_TIMEOUT_MS", 3000)
    later = LIVE.replace(
        "box.addEventListener('change', () => {",
        "box.addEventListener('change', () => setTimeout(() => {",
    ).replace("});\n}", "}, 200));\n}")
    assert "setTimeout" in later and "200)" in later
    assert check(browser, tmp_path, WIDGET + later) == []


def test_widget_whose_python_refuses_or_is_missing(browser, tmp_path):
    def refuses(kind: str, inputs: dict) -> dict:
        raise ValueError("zero_stage=3 needs dp > 1")

    only(check(browser, tmp_path, WIDGET + LIVE, live=refuses), "raised ValueError")
    only(check(browser, tmp_path, WIDGET + LIVE, live=None), "no live module")
    shows = WIDGET.replace('"total":10010}', '"error":"no"}')
    assert any("shows an error" in f for f in check(browser, tmp_path, shows + LIVE))


def test_widget_inputs_not_its_controls_or_a_control_missing(browser, tmp_path):
    lying = WIDGET.replace('"dp":1}', '"dp":8}')
    assert "are not its controls' values" in check(browser, tmp_path, lying + LIVE)[0]
    no_dp = WIDGET.replace('data-control="dp"', 'data-control="dp_degree"')
    assert any("has no control dp" in f for f in check(browser, tmp_path, no_dp + LIVE))
    other = WIDGET.replace('data-live="predictor"', 'data-live="oracle"')
    only(check(browser, tmp_path, other + LIVE), 'data-live must be "predictor" or "planner"')


def test_widget_with_a_disabled_control(browser, tmp_path):
    frozen = WIDGET.replace(
        '<select data-control="zero_stage">', '<select data-control="zero_stage" disabled>'
    )
    only(check(browser, tmp_path, frozen + LIVE), "cannot set zero_stage=")


@pytest.mark.parametrize("page, kind", list(bc.LIVE_PAGES.items()))
def test_chapters_without_their_widget(browser, tmp_path, page, kind):
    fails = check(browser, tmp_path, "<p>only a chart</p>", name=page)
    assert fails == [f'{page}: no [data-live="{kind}"]: the {kind} is dead without a kernel']


def test_raw_glue_and_cite_text(browser, tmp_path):
    body = "<p>The model needs {glue:}`total_gb` GB {cite:p}`rajbhandari2020`.</p>"
    fails = check(browser, tmp_path, body)
    assert any("raw markup '{glue:'" in f for f in fails) and any("'{cite'" in f for f in fails), (
        fails
    )


def test_raw_tex_and_untypeset_math(browser, tmp_path):
    body = '<p>$$M = 16\\Psi$$ and <span class="math">\\(s = 4096\\)</span></p>'
    fails = check(browser, tmp_path, body)
    assert any("raw TeX '$$'" in f for f in fails), fails
    assert any(
        "1 of 1 math elements not typeset by MathJax (first: '\\\\(s = 4096\\\\)')" in f
        for f in fails
    ), fails


@pytest.mark.parametrize("row", ["|---|---:|", "| — | —: |", "|:---|:---:|---|", "|—|—:|—:|"])
def test_markdown_table_left_as_text(browser, tmp_path, row):
    # what myst-nb shows for IPython.display.Markdown("| a | b |\n|---|---:|...") parsed as
    # CommonMark: one paragraph of pipes (smart quotes make the dashes em dashes)
    body = f"<p>| operator | calls |\n{row}\n| matmul | 12 |</p>"
    only(
        check(browser, tmp_path, body),
        "a Markdown table as text in the visible text (...| operator",
    )
    twice = check(browser, tmp_path, body + body.replace("matmul", "add"))
    only(twice, "a Markdown table as text in the visible text (2 times, first: ...")


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("the **second** copy", "raw bold '**'"),
        ("see {numref}`fig-ring`", "'{numref'"),
        ("see {doc}`chapter 5 <05>`", "a raw role"),
        ("```python x = 1 ```", "'```'"),
        (":::{note} a call-out :::", "':::'"),
    ],
)
def test_other_raw_markup(browser, tmp_path, text, what):
    only(check(browser, tmp_path, f"<p>{text}</p>"), what)


@pytest.mark.parametrize(
    "alt",
    [
        None,  # no alt at all
        "",
        "../_images/29a8c84a1f0e3b2d9c7a6e5f4b3c2d1e.png",  # what Sphinx writes for myst-nb's images
        "29a8c84a1f0e3b2d9c7a6e5f4b3c2d1e",
        "figure",  # one word says nothing
        "Memory of pic.svg",  # the file's name
    ],
)
def test_image_without_a_description(browser, tmp_path, alt):
    img = '<img src="pic.svg">' if alt is None else f'<img src="pic.svg" alt="{alt}">'
    only(check(browser, tmp_path, f"<figure>{img}</figure>"), "has no description")


def test_hidden_image_without_a_description(browser, tmp_path):
    body = '<details><summary>more</summary><img src="pic.svg" alt="pic.svg"></details>'
    only(check(browser, tmp_path, body), "img pic.svg has no description (alt 'pic.svg')")


def test_build_folder_path_in_the_page(browser, tmp_path):
    repo = tmp_path / "repo"
    body = f"<pre style='overflow-x:auto'>File {repo}/minitorch_dist/tensor_parallel/cost.py:80, in kv_heads()</pre>"
    assert check(browser, tmp_path, body) == [
        f"page.html: shows the build folder's path {repo}: {repo}"
        "/minitorch_dist/tensor_parallel/cost.py:80, in kv_..."
    ]
    relative = "<pre style='overflow-x:auto'>File minitorch_dist/tensor_parallel/cost.py:80, in kv_heads()</pre>"
    assert check(browser, tmp_path, relative) == []


def test_zero_size_and_broken_images(browser, tmp_path):
    body = '<img src="pic.svg" style="width:0" alt="squashed"><figure><img src="gone.png" alt="gone"></figure>'
    fails = check(browser, tmp_path, body)
    assert any("img pic.svg is 0x" in f for f in fails), fails
    assert any("img gone.png did not load" in f for f in fails), fails


def test_broken_link_and_anchor(browser, tmp_path):
    body = '<a href="other.html#nowhere">a</a><a href="#gone">b</a><a href="missing.html">c</a>'
    assert check(browser, tmp_path, body) == [
        "page.html: link to missing anchor #nowhere in other.html",
        "page.html: link to missing anchor #gone",
        "page.html: link to missing file missing.html",
    ]


def test_console_and_page_errors(browser, tmp_path):
    body = '<script>console.error("boom")</script><script>throw new Error("bang")</script>'
    fails = check(browser, tmp_path, body)
    assert "page.html: console error: boom" in fails and "page.html: page error: bang" in fails, (
        fails
    )


def test_external_requests_are_aborted_and_reported(browser, tmp_path):
    body = '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>'
    assert check(browser, tmp_path, body) == [
        "page.html: requested https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js while offline"
    ]


def test_main_prints_one_line_per_failure(tmp_path, monkeypatch, capsys):
    (tmp_path / "index.html").write_text("<html></html>")
    monkeypatch.setattr(
        bc, "check_parallel", lambda *a: [("a.html", "cell 3: 2 stdout output boxes")]
    )
    assert bc.main([str(tmp_path)]) == 1
    assert "a.html: cell 3: 2 stdout output boxes" in capsys.readouterr().out


def test_redirect_page_is_checked_without_the_browser(browser, tmp_path):
    html, repo = write_site(tmp_path, "<p>fine</p>")
    (html / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=page.html" />')
    (html / "old.html").write_text('<meta http-equiv="Refresh" content="0; url=gone.html" />')
    fails = bc.check_site(html, repo, None, browser, fake_live)
    assert fails == [("old.html", "redirects to missing gone.html")]


def test_widget_option_that_does_not_show_its_value(browser, tmp_path):
    """1 shown as "yes" (a label lookup keyed by True) fails, with scripts on and off."""
    yes = WIDGET.replace('<option value="1">1</option>', '<option value="1">yes</option>')
    fails = check(browser, tmp_path, yes + LIVE)
    only(fails, "control zero_stage (ZeRO stage): option 1 shows 'yes', not its value")
    assert len(fails) == 2 and "with scripts off" in fails[1]
    many = WIDGET.replace('value="8">8<', 'value="8">eight<')
    only(check(browser, tmp_path, many + LIVE), "control dp (dp ranks): option 8 shows 'eight'")
    thousands = WIDGET.replace('value="8">8<', 'value="8">8</option><option value="16384">16,384<')
    only(check(browser, tmp_path, thousands + LIVE), "dp offers [1, 8, 16384]")


def test_widget_label_or_controls_unlike_pythons(browser, tmp_path):
    label = WIDGET.replace("<span>dp ranks</span>", "<span>ranks</span>")
    only(
        check(browser, tmp_path, label + LIVE),
        "control dp is labelled 'ranks', Python's label is 'dp ranks'",
    )
    unlabelled = WIDGET.replace("<span>ZeRO stage</span>", "")
    assert check(browser, tmp_path, unlabelled + LIVE) == [
        "page.html: live predictor 1: control zero_stage is labelled '', Python's label is "
        "'ZeRO stage'",
        "page.html: live predictor 1 with scripts off: control zero_stage is labelled '', "
        "Python's label is 'ZeRO stage'",
    ]


def test_widget_text_unlike_pythons_rendering(browser, tmp_path):
    stale = LIVE.replace("total <b>${", "total <b>1${")
    only(check(browser, tmp_path, WIDGET + stale), "the page reads 'total 1")
    wrong = WIDGET.replace("total <b>10,010</b>", "total <b>10,011</b>")
    fails = check(browser, tmp_path, wrong + LIVE)
    only(fails, "the page reads 'total 10,011' where Python's rendering reads 'total 10,010'")
    assert (
        len(fails) == 2 and "with scripts off" in fails[1]
    )  # built with it, shown before a change


def test_shows():
    assert shows(1, "1") and shows(16384, "16,384") and shows(True, "yes")
    assert not shows(1, "yes") and not shows(0, "no") and not shows(True, "1")
    assert shows("mixed", " mixed ") and not shows(False, "0")
    assert text_of("<p>a <b>1,024</b>\n<i>x</i></p>") == "a 1,024 x"


def test_controls_labelled_as_the_old_lookup_did_fail():
    """The real widgets' controls, shown as a label lookup keyed by True showed them (1 as "yes",
    0 as "no"): every such option is named; shown by their values, none fails."""
    from minitorch_dist.viz.live import controls

    def seen(kind: str, text) -> list[dict]:
        return [
            {
                "control": name,
                "label": label,
                "options": [[json.dumps(c), text(c)] for c in choices],
            }
            for name, (label, choices, _) in controls(kind).items()
        ]

    def old(value):
        return {True: "yes", False: "no"}.get(value, f"{value:,}" if type(value) is int else value)

    def new(value):
        if type(value) is bool:
            return "yes" if value else "no"
        return f"{value:,}" if type(value) is int else value

    fails = control_failures(seen("predictor", old), controls("predictor"))
    assert "control micro_batch (micro-batch): option 1 shows 'yes', not its value" in fails
    assert (
        "control zero_stage (ZeRO stage): option 0 shows 'no', 1 shows 'yes', not its value"
        in fails
    )
    planner = control_failures(seen("planner", old), controls("planner"))
    assert any(f.startswith("control cp (cp): option 1 shows 'yes'") for f in planner)
    assert not any("control sp" in f or "control offload" in f for f in fails + planner)
    for kind in ("predictor", "planner"):
        assert control_failures(seen(kind, new), controls(kind)) == []
    relabelled = seen("predictor", new)
    relabelled[0]["label"] = "preset"
    assert control_failures(relabelled, controls("predictor")) == [
        "control preset is labelled 'preset', Python's label is 'model'"
    ]


LONG_PATH = "minitorch_dist/data_parallel/profiling/profile_ddp_step_with_a_long_name.py"


def test_page_wider_than_a_phone(browser, tmp_path):
    """Named by what reaches furthest right: inline code, a table, or a paragraph's text."""
    code = f"<p>See <code class='literal'>{LONG_PATH}</code>.</p>"
    fails = check(browser, tmp_path, code)
    assert len(fails) == 1, fails
    assert fails[0].startswith("page.html: the page is ") and " px wide at 390 px" in fails[0]
    assert f'widest: <code.literal> "{LONG_PATH[:57]}..." reaching' in fails[0]
    table = "<table><tr>" + "<td>262.8&nbsp;GiB</td>" * 8 + "</tr></table>"
    only(check(browser, tmp_path, table), "at 390 px, wider than the 390 px screen; widest: <t")
    url = f"<p>From https://example.org/{LONG_PATH}</p>"
    only(check(browser, tmp_path, url), 'widest: <p> "From https://example.org/minitorch')


def test_wide_things_in_their_own_scrolling_box_pass(browser, tmp_path):
    box = '<div style="overflow-x:auto">{}</div>'
    table = "<table><tr>" + "<td>262.8&nbsp;GiB</td>" * 8 + "</tr></table>"
    pre = f"<pre>{LONG_PATH * 3}</pre>"
    code = f"<p>See <code style='overflow-wrap:anywhere'>{LONG_PATH}</code>.</p>"
    assert check(browser, tmp_path, box.format(table) + box.format(pre) + code) == []


@pytest.mark.parametrize("text", ["262.8 GiB", "3,381 of 11,593", "2.55e-05", "12 ms"])
def test_number_split_from_its_unit(browser, tmp_path, text):
    cell = f'<table><tr><td style="width:1px">{text}</td><td>a label</td></tr></table>'
    fails = check(browser, tmp_path, cell)
    assert fails == [
        f"page.html: a number is split from its unit in a table cell at {w} px ({text!r} on "
        f"{text.count(' ') + 1 if ' ' in text else 2} lines)"
        for w in (1280, 390)
    ], fails
    kept = cell.replace('style="width:1px"', 'style="width:1px;white-space:nowrap"')
    assert check(browser, tmp_path, kept) == []
    prose = cell.replace(text, "a few words of prose")
    assert check(browser, tmp_path, prose) == []


def test_figure_that_cannot_be_opened_full_size(browser, tmp_path):
    img = '<img src="wide.svg" style="max-width:100%" alt="A wide black bar.">'
    only(
        check(browser, tmp_path, f"<figure>{img}</figure>"),
        "a figure cannot be opened at full size: not inside a link to its own file (wide.svg)",
    )
    output = f'<div class="cell_output"><a href="other.html">{img}</a></div>'
    only(check(browser, tmp_path, output), "not inside a link to its own file")
    assert check(browser, tmp_path, f'<figure><a href="wide.svg">{img}</a></figure>') == []
    small = '<figure><img src="pic.svg" alt="A black square."></figure>'  # an icon: no link
    assert check(browser, tmp_path, small) == []


def test_layout_failures_messages():
    from minitorch_dist.course.browser_check_layout import layout_failures

    found = {
        "width": 490,
        "viewport": 390,
        "widest": {"what": '<code.literal> "a/b.py"', "right": 490},
        "split": [{"text": "262.8 GiB", "lines": 2}, {"text": "1 ms", "lines": 2}],
        "unlinked": ["a.png"],
    }
    assert layout_failures(found, "at 390 px", figures=False) == [
        'the page is 490 px wide at 390 px, wider than the 390 px screen; widest: <code.literal> "a/b.py" reaching 490 px',
        "a number is split from its unit in a table cell at 390 px (2 cells, first: '262.8 GiB' on 2 lines)",
    ]
    clean = {"width": 390, "viewport": 390, "widest": None, "split": [], "unlinked": []}
    assert layout_failures(clean) == []


def _png(path: Path, text_pt: float, width_in: float = 6.0, book: bool = True) -> None:
    """A 100-dpi PNG whose smallest text is ``text_pt`` points; ``book=False``: saved by plain
    matplotlib, so it records no text size."""
    from matplotlib.figure import Figure

    from minitorch_dist.figures import BookFigure

    fig = (BookFigure if book else Figure)(figsize=(width_in, 3))
    ax = fig.subplots()
    ax.plot([0, 1, 2], [0, 1, 4], label="a series")
    ax.tick_params(labelsize=max(text_pt, 10))
    ax.legend(fontsize=text_pt)
    fig.savefig(path, dpi=100)


def test_figure_text_under_8_pt_as_shown(browser, tmp_path):
    """A figure with 6 pt text fails; with 10 pt it passes at its own size and fails when the
    page shrinks it to half; a PNG that records no text size fails."""
    html = tmp_path / "html"
    html.mkdir()
    _png(html / "small.png", 6)
    _png(html / "fine.png", 10)
    _png(html / "plain.png", 10, book=False)

    def figure(name: str, style: str = "max-width:100%") -> str:
        return f'<figure><a href="{name}"><img src="{name}" style="{style}" alt="A plot."></a></figure>'

    only(
        check(browser, tmp_path, figure("small.png")),
        "figure small.png: its smallest text is 6.2 pt as shown (600 px wide, shown at 600 px), "
        "under 8 pt",
    )
    assert check(browser, tmp_path, figure("fine.png")) == []
    only(
        check(browser, tmp_path, figure("fine.png", "width:300px")),
        "figure fine.png: its smallest text is 5.2 pt as shown (600 px wide, shown at 300 px)",
    )
    only(check(browser, tmp_path, figure("plain.png")), "figure plain.png records no text size")


def test_font_failures_without_a_browser(tmp_path):
    """The PNG records its smallest text (points and pixels); the check scales the pixels by
    the displayed width. Tick labels count: they exist only once the figure is laid out."""
    from minitorch_dist.course.browser_check_layout import font_failures, png_text

    _png(tmp_path / "f.png", 8, width_in=10)
    assert png_text(tmp_path / "f.png")["MinFontPt"] == "8.00"
    assert png_text(tmp_path / "f.png")["MinFontPx"] == "11.11"
    shown = {"file": "/f.png", "src": "f.png", "natural": 1000}
    assert font_failures({"figures": [{**shown, "shown": 1000}]}, tmp_path) == []
    (fail,) = font_failures({"figures": [{**shown, "shown": 688}]}, tmp_path)
    assert "its smallest text is 5.7 pt as shown (1000 px wide, shown at 688 px)" in fail
