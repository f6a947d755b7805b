"""The script behind the book's live widgets (``_static/live/live.js``, written by
:func:`minitorch_dist.viz.live_html.write_assets`).

It finds every ``[data-live]`` element of the page. When one scrolls into view or a control is
first touched it starts the book's own Pyodide (``_static/vendor/pyodide/``, no network beyond
the book's folder) and imports :mod:`minitorch_dist.viz.live`. The same code runs from http://
and from ``file://`` (a book opened by double-clicking ``index.html``), where Chromium refuses
``fetch()`` and ES-module imports: Pyodide's files and ``minitorch_dist.zip`` come as classic
scripts (``<name>.js``, :func:`minitorch_dist.vendor.data_script`), the module
``pyodide.asm.mjs`` is imported from a ``blob:`` URL of its text, and while Pyodide starts a
``fetch`` shim answers its two requests (the ``.wasm``, the standard library) from those bytes.
Then, for the element's current controls, it steps through
:func:`~minitorch_dist.viz.live.live_steps` (the planner ranks a new problem in parts, the page
repaints between them and shows "ranked part k of n") up to its ``live_result`` answer, renders
it with ``render_live`` there and writes ``data-inputs``, ``data-result`` (the JSON Python
produced, untouched) and the HTML; ``data-state`` goes ``static`` -> ``loading`` -> ``ready``
(``busy`` while an answer is computed, ``error`` if Python could not start). No arithmetic here:
the page shows what Python computed.
"""

LIVE_JS = r"""
(function () {
  "use strict";
  var here = document.currentScript ? document.currentScript.src.replace(/[?#].*$/, "") : "";
  var base = here.slice(0, here.lastIndexOf("/") + 1);
  var pyodideURL = new URL("../vendor/pyodide/", base).href;
  var files = self.minitorchLiveFiles = self.minitorchLiveFiles || {};
  var booting = null;

  function loadScript(src) {
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = src;
      s.onload = resolve;
      s.onerror = function () { reject(new Error("cannot load " + src)); };
      document.head.appendChild(s);
    });
  }

  async function data(folder, name) {  // a file the book carries as a classic script
    if (!files[name]) await loadScript(folder + name + ".js");
    if (!files[name]) throw new Error(folder + name + ".js did not define " + name);
    return files[name];
  }

  function bytes(entry) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(entry.base64);
    var bin = atob(entry.base64), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function pause() { return new Promise(function (r) { setTimeout(r, 0); }); }

  function boot(say) {
    if (!booting) {
      booting = (async function () {
        var t0 = performance.now();
        say("starting Python (Pyodide, about 17 MB, from the book's own files)...");
        var got = await Promise.all([
          window.loadPyodide ? null : loadScript(pyodideURL + "pyodide.js"),
          data(pyodideURL, "pyodide.asm.mjs"), data(pyodideURL, "pyodide.asm.wasm"),
          data(pyodideURL, "python_stdlib.zip"), data(pyodideURL, "pyodide-lock.json"),
          data(base, "minitorch_dist.zip"),
        ]);
        var served = {};
        served[pyodideURL + "pyodide.asm.wasm"] = [bytes(got[2]), "application/wasm"];
        served[pyodideURL + "python_stdlib.zip"] = [bytes(got[3]), "application/zip"];
        var module = URL.createObjectURL(new Blob([got[1].text], {type: "text/javascript"}));
        var realFetch = window.fetch;
        window.fetch = function (input, init) {
          var url = typeof input === "string" ? input : (input && input.url) || String(input);
          var hit = served[new URL(url, location.href).href];
          if (hit) return Promise.resolve(new Response(hit[0], {headers: {"Content-Type": hit[1]}}));
          return realFetch.apply(this, arguments);
        };
        var py;
        try {
          var create = (await import(module)).default;
          py = await window.loadPyodide({indexURL: pyodideURL, createPyodideModule: create,
                                         lockFileContents: got[4].text});
        } finally {
          window.fetch = realFetch;
          URL.revokeObjectURL(module);
        }
        say("loading minitorch_dist's arithmetic...");
        py.unpackArchive(bytes(got[5]), "zip", {extractDir: "/home/pyodide/live"});
        py.runPython([
          "import json, sys",
          "sys.path.insert(0, '/home/pyodide/live')",
          "from minitorch_dist.viz.live import live_steps",
          "from minitorch_dist.viz.live_html import render_live",
          "def _live_job(kind, inputs):",
          "    steps = live_steps(kind, json.loads(inputs))",
          "    def step():",
          "        out = next(steps)",
          "        if 'result' in out:",
          "            return [json.dumps(out['result']), render_live(out['result'])]",
          "        return [json.dumps(out), None]",
          "    return step",
        ].join("\n"));
        window.minitorchLive = {pyodide: py, seconds: (performance.now() - t0) / 1000};
        return py;
      })();
    }
    return booting;
  }

  function setup(el) {
    var kind = el.getAttribute("data-live");
    var selects = Array.prototype.slice.call(el.querySelectorAll("select[data-control]"));
    var status = el.querySelector(".live-status");
    var output = el.querySelector(".live-output");
    var running = false, again = false;
    function say(text) { if (status) status.textContent = text; }
    function inputs() {
      var v = {};
      selects.forEach(function (s) { v[s.getAttribute("data-control")] = JSON.parse(s.value); });
      return v;
    }
    function seconds(ms) { return ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(1) + " s"; }
    function call(fn) {  // a Python call: its answer as JS, the proxy freed
      var proxy = fn(), out = proxy.toJs();
      proxy.destroy();
      return out;
    }
    async function answer() {
      if (running) { again = true; return; }
      running = true;
      try {
        do {
          again = false;
          var values = inputs();
          if (el.getAttribute("data-state") === "ready") el.setAttribute("data-state", "busy");
          var py = await boot(say);
          say(kind === "planner" ? "Python is ranking..." : "computing...");
          await pause();  // paint the status first
          var t0 = performance.now();
          var job = py.globals.get("_live_job")(kind, JSON.stringify(values));
          var out;
          try {
            for (;;) {
              out = call(job);
              if (out[1] !== null && out[1] !== undefined) break;
              var p = JSON.parse(out[0]);
              say("Python is ranking every configuration of this problem: part " + p.done +
                  " of " + p.parts + ", " + p.configurations.toLocaleString("en-US") +
                  " configurations scored (" + seconds(performance.now() - t0) + ")...");
              await pause();  // the page stays responsive between parts
              if (again) break;  // a control changed meanwhile: answer the new values
            }
          } finally {
            job.destroy();
          }
          if (again) continue;
          output.innerHTML = out[1];
          el.setAttribute("data-inputs", JSON.stringify(values));
          el.setAttribute("data-result", out[0]);
          say("computed in this page by minitorch_dist's own Python (Pyodide) in " +
              seconds(performance.now() - t0) + ".");
        } while (again);
        el.setAttribute("data-state", "ready");
      } catch (e) {
        el.setAttribute("data-state", "error");
        say("Python could not start here (" + String(e) + "); the answer shown was computed when the book was built.");
        if (window.console) console.warn("minitorch_dist live widget:", e);
      } finally {
        running = false;
      }
    }
    function start() {
      if (el.getAttribute("data-state") !== "static") return;
      el.setAttribute("data-state", "loading");
      answer();
    }
    selects.forEach(function (s) {
      s.addEventListener("change", function () { start(); answer(); });
      s.addEventListener("input", function () { start(); answer(); });
      s.addEventListener("focus", start);
    });
    if ("IntersectionObserver" in window) {
      var seen = new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; })) { seen.disconnect(); start(); }
      });
      seen.observe(el);
    } else {
      start();
    }
  }

  function all() { document.querySelectorAll("[data-live]").forEach(setup); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", all);
  else all();
})();
"""
