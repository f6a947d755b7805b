"""The book's own MathJax and widget scripts (minitorch_dist/vendor.py): pinned, checked, offline.

Catches a tarball whose bytes are not the pinned ones, a download that fails silently, a cache
that is trusted without its check, files escaping the output folder, and a _config.yml that
points the book at a CDN (or at a path the vendoring does not write) again.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import tarfile
import urllib.error
from pathlib import Path

import pytest

from minitorch_dist.course import vendor
from minitorch_dist.course.vendor import Package, VendorError
from minitorch_dist.viz.live_data import data_script

yaml = pytest.importorskip("yaml")  # the book's tooling, not in a student's install

ROOT = Path(__file__).resolve().parent.parent


def _sri(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _tarball(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


FILES = {
    "package/dist/embed-amd.js": b"define('x', [], 1)",
    "package/dist/embed-amd.js.map": b"{}",
    "package/dist/fonts/a.woff2": b"\x00font",
    "package/src/index.ts": b"// not shipped",
    "package/LICENSE": b"BSD",
}
DATA = _tarball(FILES)
FAKE = Package("@scope/fake", "1.2.3", _sri(DATA), dest="fake", keep=("LICENSE", "dist/"))


class _Response(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """A cache in tmp_path and a registry that counts calls; ``served`` is what it returns."""
    state = {"calls": 0, "served": DATA, "down": False}

    def urlopen(url, timeout=None):
        state["calls"] += 1
        state["url"] = url
        if state["down"]:
            raise urllib.error.URLError("network is unreachable")
        return _Response(state["served"])

    monkeypatch.setattr(vendor, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(vendor.urllib.request, "urlopen", urlopen)
    return state


def test_integrity_check_accepts_the_pinned_bytes_only():
    vendor.check_integrity(DATA, FAKE.integrity)
    with pytest.raises(VendorError, match="sha512 mismatch"):
        vendor.check_integrity(DATA + b"x", FAKE.integrity)
    with pytest.raises(ValueError, match="sha512"):
        vendor.check_integrity(DATA, "sha1-abc")


def test_tarball_url_of_a_scoped_package():
    assert FAKE.tarball_url.endswith("/@scope/fake/-/fake-1.2.3.tgz")


def test_fetch_downloads_once_then_uses_the_cache(offline):
    assert vendor.fetch(FAKE) == DATA
    assert offline["calls"] == 1 and offline["url"] == FAKE.tarball_url
    offline["down"] = True
    assert vendor.fetch(FAKE) == DATA  # offline now: the cache serves it
    assert offline["calls"] == 1


def test_fetch_rejects_tampered_bytes_and_caches_nothing(offline):
    offline["served"] = DATA[:-1] + bytes([DATA[-1] ^ 1])
    with pytest.raises(VendorError, match="sha512 mismatch"):
        vendor.fetch(FAKE)
    assert not FAKE.cache_file.exists()


def test_a_corrupt_cache_is_fetched_again(offline):
    FAKE.cache_file.parent.mkdir(parents=True)
    FAKE.cache_file.write_bytes(b"truncated")
    assert vendor.fetch(FAKE) == DATA
    assert offline["calls"] == 1 and FAKE.cache_file.read_bytes() == DATA


def test_offline_with_nothing_cached_says_what_to_do(offline):
    offline["down"] = True
    with pytest.raises(VendorError, match="not cached") as err:
        vendor.fetch(FAKE)
    assert "@scope/fake@1.2.3" in str(err.value) and str(vendor.CACHE) in str(err.value)


def test_extract_keeps_only_the_listed_files(tmp_path):
    n = vendor.extract(FAKE, DATA, tmp_path / "out")
    got = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*"))
    assert n == 3
    assert got == ["LICENSE", "dist", "dist/embed-amd.js", "dist/fonts", "dist/fonts/a.woff2"]


def test_extract_refuses_a_path_outside_the_output(tmp_path):
    evil = _tarball({"package/dist/../../../escape.js": b"x"})
    with pytest.raises(VendorError, match="unsafe path"):
        vendor.extract(FAKE, evil, tmp_path / "out")
    assert not (tmp_path / "escape.js").exists()


def test_ensure_writes_once_per_pin(offline, monkeypatch, tmp_path):
    monkeypatch.setattr(vendor, "PACKAGES", (FAKE,))
    monkeypatch.setattr(vendor, "URLS", {"fake": "vendor/fake/dist/embed-amd.js"})
    dest = tmp_path / "_static" / "vendor"
    vendor.ensure(dest, quiet=True)
    assert (dest / "widgets-setup.js").read_text() == vendor.WIDGETS_SETUP
    assert (dest / "fake" / "dist" / "embed-amd.js").read_bytes() == FILES[
        "package/dist/embed-amd.js"
    ]
    offline["down"] = True
    FAKE.cache_file.unlink()  # a second build needs neither the network nor the cache
    vendor.ensure(dest, quiet=True)
    assert offline["calls"] == 1
    monkeypatch.setattr(vendor, "URLS", {"fake": "vendor/fake/dist/missing.js"})
    with pytest.raises(VendorError, match="missing"):
        vendor.ensure(dest, quiet=True)


def _run_data_script(script: str) -> dict:
    """The entry a data script files under self.minitorchLiveFiles (read back in Python)."""
    head = "(self.minitorchLiveFiles = self.minitorchLiveFiles || {})["
    assert script.startswith(head) and script.endswith(";\n")
    name, _, body = script[len(head) : -2].partition("] = ")
    return {json.loads(name): json.loads(body)}


def test_data_scripts_carry_the_exact_bytes():
    """What the page reads from file:// (classic scripts): binary files base64, module and JSON
    text as text, each with its sha256 and size."""
    blob = bytes(range(256)) * 3 + b"\x00"
    got = _run_data_script(data_script("pyodide.asm.wasm", blob))["pyodide.asm.wasm"]
    assert base64.b64decode(got["base64"]) == blob and "text" not in got
    assert got["sha256"] == hashlib.sha256(blob).hexdigest() and got["size"] == len(blob)
    src = 'export default function f() { return "é</script>"; }\n'
    got = _run_data_script(data_script("m.mjs", src.encode()))["m.mjs"]
    assert got["text"] == src and "base64" not in got
    assert "text" in _run_data_script(data_script("a.js", b"1;"))["a.js"]
    assert data_script("m.mjs", src.encode()).isascii()


def test_pyodide_is_vendored_as_data_scripts(offline, monkeypatch, tmp_path):
    """The pyodide package's big files become <name>.js data scripts (the raw files dropped);
    a missing one fails the vendoring."""
    files = {f"package/{n}": f"{n} bytes".encode() for n in vendor.PYODIDE_DATA}
    files["package/README.md"] = b"not kept"
    data = _tarball(files)
    pkg = Package("pyodide", "0.0.1", _sri(data), dest="pyodide", keep=vendor.PYODIDE_DATA)
    offline["served"] = data
    monkeypatch.setattr(vendor, "PACKAGES", (pkg,))
    monkeypatch.setattr(vendor, "URLS", {})
    dest = tmp_path / "_static" / "vendor"
    vendor.ensure(dest, quiet=True)
    got = sorted(p.name for p in (dest / "pyodide").iterdir())
    assert got == sorted([".vendored", *(f"{n}.js" for n in vendor.PYODIDE_DATA)])
    wasm = _run_data_script((dest / "pyodide" / "pyodide.asm.wasm.js").read_text())
    assert base64.b64decode(wasm["pyodide.asm.wasm"]["base64"]) == b"pyodide.asm.wasm bytes"
    (dest / "pyodide" / "python_stdlib.zip.js").unlink()
    with pytest.raises(VendorError, match="python_stdlib.zip.js is missing"):
        vendor.ensure(dest, quiet=True)


def test_pins_are_the_versions_the_book_tools_ask_for():
    """The versions myst-nb's default nb_ipywidgets_js and Sphinx's default mathjax_path load
    from CDNs are the ones vendored."""
    from myst_nb.core.config import ipywidgets_js_factory
    from sphinx.ext.mathjax import MATHJAX_URL

    pins = {p.name: p for p in vendor.PACKAGES}
    for pkg in pins.values():
        assert re.fullmatch(r"sha512-[A-Za-z0-9+/]{86}==", pkg.integrity), pkg.name
    cdn = " ".join(ipywidgets_js_factory())
    assert f"html-manager@{pins['@jupyter-widgets/html-manager'].version}/" in cdn
    assert f"require.js/{pins['requirejs'].version}/" in cdn
    major = re.search(r"mathjax@(\d+)", MATHJAX_URL).group(1)
    assert pins["mathjax"].version.split(".")[0] == major
    assert MATHJAX_URL.rsplit("/", 1)[1] == vendor.URLS["mathjax"].rsplit("/", 1)[1]


def test_config_points_at_the_vendored_files_not_a_cdn():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    assert config["mathjax_path"] == vendor.URLS["mathjax"]
    order = ["requirejs", "widgets-setup", "html-manager"]  # needs require; configures embed
    assert list(config["nb_ipywidgets_js"]) == [vendor.URLS[k] for k in order]
    for attrs in config["nb_ipywidgets_js"].values():  # crossorigin breaks file:// pages
        assert not attrs or "crossorigin" not in attrs
    assert (
        "minitorch_dist.course.book_links"
        in yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["extra_extensions"]
    )
    assert "/_vendor/" in (ROOT / ".gitignore").read_text().split()
    # Jupyter Book links every .js under the book's _static/ into every page: not there.
    assert vendor.STATIC.name != "_static" and vendor.STATIC.parent == ROOT
    assert "_vendor/**" in yaml.safe_load((ROOT / "_config.yml").read_text())["exclude_patterns"]


def test_vendored_files_when_built(tmp_path):
    """Where this checkout has vendored (a build ran), every URL the book uses is a file, with
    MathJax's fonts beside it."""
    static = vendor.DEST
    if not static.exists():
        pytest.skip("no _vendor/vendor yet: run python -m minitorch_dist.vendor")
    for url in vendor.URLS.values():
        assert (static.parent / url).stat().st_size > 500, url
    for name in vendor.PYODIDE_DATA:  # the page reads these, from file:// too
        assert (static / "pyodide" / f"{name}.js").stat().st_size > 10_000, name
        assert not (static / "pyodide" / name).exists()  # the page reads the scripts only
    fonts = list((static / "mathjax/es5/output/chtml/fonts/woff-v2").glob("*.woff"))
    assert len(fonts) > 10
