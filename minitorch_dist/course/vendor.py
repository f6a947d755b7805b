"""The book's own copies of MathJax, require.js, the ipywidgets embedder and Pyodide, for offline
reading.

The built book would otherwise load these from CDNs at read time, so a local ``_build/html``
opened without a network shows raw TeX and empty widget boxes. At build time this module
fetches pinned npm packages from the registry, checks each tarball against the registry's
``dist.integrity`` (sha512), caches it under ``.venv/vendor-cache/`` and copies the files the
pages need to ``_vendor/vendor/`` (git-ignored), which the built book serves as
``_static/vendor/``. Standard library only: a reader's machine may have no node/npm.

    python -m minitorch_dist.vendor          # fetch (or reuse the cache) and write _vendor/vendor

``_config.yml`` points Sphinx's ``mathjax_path`` and myst-nb's ``nb_ipywidgets_js`` at the
copies (``URLS`` below); ``minitorch_dist.book_links`` runs :func:`ensure` when a build starts.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import sys
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from minitorch_dist.viz.live_data import write_data_script

ROOT = Path(__file__).resolve().parents[2]
# Not under the book's _static/: Jupyter Book links every .js and .css found there into every
# page. minitorch_dist.book_links adds _vendor/ to html_static_path, so the files land in the
# built book's _static/vendor/.
STATIC = ROOT / "_vendor"
DEST = STATIC / "vendor"
CACHE = Path(os.environ.get("MINITORCH_DIST_VENDOR_CACHE", ROOT / ".venv" / "vendor-cache"))
REGISTRY = os.environ.get("MINITORCH_DIST_NPM_REGISTRY", "https://registry.npmjs.org")


@dataclass(frozen=True)
class Package:
    """One npm tarball: which files of it (paths under ``package/``) go to ``DEST / dest``."""

    name: str
    version: str
    integrity: str  # the registry's dist.integrity: "sha512-<base64>"
    dest: str
    keep: tuple[str, ...]  # files, or folders ending in "/"
    skip_suffixes: tuple[str, ...] = (".map",)

    @property
    def tarball_url(self) -> str:
        base = self.name.rsplit("/", 1)[-1]
        return f"{REGISTRY}/{self.name}/-/{base}-{self.version}.tgz"

    @property
    def cache_file(self) -> Path:
        return CACHE / f"{self.name.replace('/', '__')}-{self.version}.tgz"


PACKAGES = (
    # MathJax 3, the major version Sphinx's mathjax extension configures (tex-mml-chtml.js).
    # Its CommonHTML fonts, input extensions (autoload), menu and a11y modules load on demand
    # from paths relative to the script, so they come too.
    Package(
        "mathjax",
        "3.2.2",
        "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
        dest="mathjax",
        keep=(
            "LICENSE",
            "es5/tex-mml-chtml.js",
            "es5/input/",
            "es5/output/chtml/",
            "es5/a11y/",
            "es5/ui/",
            "es5/sre/",
            "es5/adaptors/",
        ),
    ),
    # require.js, the version myst-nb's default nb_ipywidgets_js loads from cdnjs.
    Package(
        "requirejs",
        "2.3.4",
        "sha512-qPD5gRrj6kGQ0ZySAJgqbArkaDqPMbQIT0zSZDkIv1mfA17w/tR2Faq5l2qqRf2CdQx6FWln9nUrgd2UDzb19A==",
        dest="requirejs",
        keep=("require.js",),  # its MIT notice is in the file
    ),
    # The ipywidgets 8 embedder myst-nb asks for. embed-amd.js bundles @jupyter-widgets/base,
    # controls and output (its loadClass resolves those three itself and only goes to the
    # CDN for other modules, which the book's widgets do not use); its Font Awesome files are
    # loaded relative to the script.
    Package(
        "@jupyter-widgets/html-manager",
        "1.0.6",
        "sha512-+Mn+Ra8wyIHrYaUpfmf9A3dsLkt/NuwzPQN8sthdxBD35VV5cOJbpmgMhNR27n/rmP3mKyEe0PWCJrtZrXTXDQ==",
        dest="html-manager",
        keep=("LICENSE", "dist/"),
        skip_suffixes=(".map", "dist/embed.js", "dist/libembed-amd.js"),
    ),
    # Pyodide: CPython compiled to WebAssembly, which runs the package's own torch-free arithmetic
    # (minitorch_dist.viz.live) in the chapter 1 and 11 widgets. Only the interpreter, its loader and
    # the standard library come (no packages: the arithmetic needs none); MPL-2.0 (package.json).
    Package(
        "pyodide",
        "314.0.7",
        "sha512-0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A==",
        dest="pyodide",
        keep=(
            "package.json",
            "pyodide.js",
            "pyodide.asm.mjs",
            "pyodide.asm.wasm",
            "python_stdlib.zip",
            "pyodide-lock.json",
        ),
    ),
)
# Pyodide's files the page reads as classic scripts (``<name>.js``, see :func:`write_data_script`):
# a page opened from file:// may run a classic <script src>, but Chromium refuses it fetch() and
# ES-module imports (module workers too), which is how Pyodide loads these. The raw files are
# then dropped: the page starts Pyodide from these scripts only, from http:// as from file://.
PYODIDE_DATA = (
    "pyodide.js",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
    "pyodide-lock.json",
)
DATA_FORMAT = "minitorchLiveFiles 2"  # in the stamp: a change of the format rewrites the files

# What _config.yml points at (relative to _static/, as Sphinx resolves html asset paths).
URLS = {
    "mathjax": "vendor/mathjax/es5/tex-mml-chtml.js",
    "requirejs": "vendor/requirejs/require.js",
    "widgets-setup": "vendor/widgets-setup.js",
    "html-manager": "vendor/html-manager/dist/embed-amd.js",
}

# Loaded between require.js and embed-amd.js (ours, not from npm). Two fixes, both seen in
# headless Chromium on lab 1:
# - embed-amd.js finds its Font Awesome files relative to its AMD module's URL, which require.js
#   puts beside the page ("labs/@jupyter-widgets/html-manager/dist/...woff2", not found): map
#   that module path to the vendored folder, found relative to this script.
# - ipywidgets 8 typesets widget labels with MathJax 2's MathJax.Hub.Queue, which MathJax 3
#   lacks ("Cannot read properties of undefined (reading 'Queue')", once per widget): give
#   every MathJax object a Hub whose Queue calls MathJax 3's typesetPromise.
WIDGETS_SETUP = """\
(function () {
  "use strict";
  var here = document.currentScript.src.replace(/[?#].*$/, "");
  var dist = here.slice(0, here.lastIndexOf("/") + 1) + "html-manager/dist";
  window.require.config({paths: {"@jupyter-widgets/html-manager/dist": dist}});
  var hub = {Queue: function () {
    var mj = window.MathJax, nodes = [];
    for (var i = 0; i < arguments.length; i++) {
      var cmd = arguments[i];
      if (Array.isArray(cmd) && cmd[0] === "Typeset" && cmd[2]) nodes.push(cmd[2]);
    }
    if (mj && mj.startup && mj.startup.promise && mj.typesetPromise) {
      mj.startup.promise.then(function () { return mj.typesetPromise(nodes); });
    }
  }};
  var current = window.MathJax;
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    get: function () { return current; },
    set: function (value) {
      current = value;
      if (value && typeof value === "object" && !value.Hub) value.Hub = hub;
    },
  });
  if (current && !current.Hub) current.Hub = hub;
})();
"""


class VendorError(RuntimeError):
    """A package could not be fetched, or its bytes are not the pinned ones."""


def check_integrity(data: bytes, integrity: str) -> None:
    """Raise VendorError unless ``data`` has the sha512 of an npm ``dist.integrity`` string."""
    algo, _, want = integrity.partition("-")
    if algo != "sha512":
        raise ValueError(f"integrity must be a sha512 SRI string, got {integrity[:20]!r}")
    got = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if got != want:
        raise VendorError(f"sha512 mismatch: expected {want}, got {got}")


def fetch(pkg: Package, timeout: float = 60.0) -> bytes:
    """The package's tarball, from the cache or the registry; always integrity-checked."""
    if pkg.cache_file.exists():
        data = pkg.cache_file.read_bytes()
        try:
            check_integrity(data, pkg.integrity)
            return data
        except VendorError:
            pkg.cache_file.unlink()  # a corrupt or truncated download: fetch it again
    print(f"vendor: fetching {pkg.name}@{pkg.version} from {pkg.tarball_url}", flush=True)
    try:
        with urllib.request.urlopen(pkg.tarball_url, timeout=timeout) as r:
            data = r.read()
    except (urllib.error.URLError, OSError) as e:
        raise VendorError(
            f"cannot download {pkg.name}@{pkg.version} from {pkg.tarball_url} ({e}) and it is "
            f"not cached in {CACHE}. The book carries its own MathJax and widget scripts, "
            f"fetched once from the npm registry: connect to the network once, or copy "
            f"{pkg.cache_file.name} into {CACHE}."
        ) from e
    try:
        check_integrity(data, pkg.integrity)
    except VendorError as e:
        raise VendorError(f"{pkg.name}@{pkg.version} from {pkg.tarball_url}: {e}") from None
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = pkg.cache_file.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(pkg.cache_file)
    return data


def _wanted(pkg: Package, rel: str) -> bool:
    if any(rel.endswith(s) for s in pkg.skip_suffixes):
        return False
    return any(rel == k or (k.endswith("/") and rel.startswith(k)) for k in pkg.keep)


def extract(pkg: Package, data: bytes, dest: Path) -> int:
    """Copy the kept files of the tarball into ``dest``; return how many were written."""
    n = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            top, _, rel = member.name.partition("/")  # npm tarballs hold one top folder
            if not member.isfile() or not _wanted(pkg, rel):
                continue
            target = (dest / rel).resolve()
            if dest.resolve() not in target.parents:
                raise VendorError(f"{pkg.name}: unsafe path {member.name!r} in the tarball")
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(member)
            assert src is not None
            target.write_bytes(src.read())
            n += 1
    if n == 0:
        raise VendorError(f"{pkg.name}@{pkg.version}: none of {pkg.keep} is in the tarball")
    return n


def _stamp(pkg: Package) -> str:
    data = f" {DATA_FORMAT}" if pkg.name == "pyodide" else ""
    return f"{pkg.name}@{pkg.version} {pkg.integrity} {pkg.keep} {pkg.skip_suffixes}{data}\n"


def ensure(dest: Path = DEST, quiet: bool = False) -> Path:
    """Write every package's files under ``dest`` (skipped where the same pin is in place)."""
    for pkg in PACKAGES:
        out = dest / pkg.dest
        stamp = out / ".vendored"
        if stamp.exists() and stamp.read_text() == _stamp(pkg):
            continue
        data = fetch(pkg)
        if out.exists():
            shutil.rmtree(out)
        n = extract(pkg, data, out)
        if pkg.name == "pyodide":
            for name in PYODIDE_DATA:
                write_data_script(out / name)
                (out / name).unlink()
        stamp.write_text(_stamp(pkg))
        if not quiet:
            print(f"vendor: {pkg.name}@{pkg.version}: {n} files in {out}", flush=True)
    setup = dest / "widgets-setup.js"  # URLS["widgets-setup"]
    if not setup.exists() or setup.read_text() != WIDGETS_SETUP:
        setup.write_text(WIDGETS_SETUP)
    pyodide = [
        f"vendor/{p.dest}/{name}.js"
        for p in PACKAGES
        if p.name == "pyodide"
        for name in PYODIDE_DATA
    ]
    for url in [*URLS.values(), *pyodide]:
        if not (dest.parent / url).is_file():
            raise VendorError(f"{dest.parent / url} is missing after vendoring")
    return dest


def main() -> int:
    try:
        ensure()
    except VendorError as e:
        print(f"vendor: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
