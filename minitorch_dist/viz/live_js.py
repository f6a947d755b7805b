"""The script behind the book's live widgets (``_static/live/live.js``, written by
:func:`minitorch_dist.viz.live_html.write_assets`).

It finds every ``[data-live]`` element of the page. When one scrolls into view or a control is
first touched it loads the book's own Pyodide (``_static/vendor/pyodide/``, no network beyond
the book's folder), unpacks ``minitorch_dist.zip`` into Pyodide's file system and imports
:mod:`minitorch_dist.viz.live`. Then, for the element's current controls, it calls
``live_result`` and ``render_live`` in Python and writes ``data-inputs``, ``data-result`` (the
JSON Python produced, untouched) and the HTML; ``data-state`` goes ``static`` -> ``loading`` ->
``ready`` (``busy`` while an answer is computed, ``error`` if Python could not start). No
arithmetic here: the page shows what Python computed.
"""

LIVE_JS = r"""
(function () {
  "use strict";
  var here = document.currentScript ? document.currentScript.src.replace(/[?#].*$/, "") : "";
  var base = here.slice(0, here.lastIndexOf("/") + 1);
  var pyodideURL = base + "../vendor/pyodide/";
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

  function boot(say) {
    if (!booting) {
      booting = (async function () {
        var t0 = performance.now();
        say("starting Python (Pyodide, about 13 MB, from the book's own files)...");
        if (!window.loadPyodide) await loadScript(pyodideURL + "pyodide.js");
        var py = await window.loadPyodide({indexURL: pyodideURL, fullStdLib: false});
        say("loading minitorch_dist's arithmetic...");
        var zip = await fetch(base + "minitorch_dist.zip");
        if (!zip.ok) throw new Error("cannot load " + base + "minitorch_dist.zip: " + zip.status);
        py.unpackArchive(await zip.arrayBuffer(), "zip", {extractDir: "/home/pyodide/live"});
        py.runPython([
          "import json, sys",
          "sys.path.insert(0, '/home/pyodide/live')",
          "from minitorch_dist.viz.live import live_result",
          "from minitorch_dist.viz.live_html import render_live",
          "def _live_answer(kind, inputs):",
          "    result = live_result(kind, json.loads(inputs))",
          "    return [json.dumps(result), render_live(result)]",
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
    async function answer() {
      if (running) { again = true; return; }
      running = true;
      try {
        do {
          again = false;
          var values = inputs();
          if (el.getAttribute("data-state") === "ready") el.setAttribute("data-state", "busy");
          var py = await boot(say);
          var slow = kind === "planner";
          say(slow ? "Python is ranking every configuration of this problem..." : "computing...");
          await new Promise(function (r) { setTimeout(r, 0); });  // paint the status first
          var t0 = performance.now();
          var proxy = py.globals.get("_live_answer")(kind, JSON.stringify(values));
          var out = proxy.toJs();
          proxy.destroy();
          output.innerHTML = out[1];
          el.setAttribute("data-inputs", JSON.stringify(values));
          el.setAttribute("data-result", out[0]);
          var ms = performance.now() - t0;
          say("computed in this page by minitorch_dist's own Python (Pyodide) in " +
              (ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(1) + " s") + ".");
        } while (again);
        el.setAttribute("data-state", "ready");
      } catch (e) {
        el.setAttribute("data-state", "error");
        var why = location.protocol === "file:"
          ? "browsers do not let a file:// page start it: serve the book's folder, e.g. " +
            "python3 -m http.server -d _build/html, and open http://localhost:8000"
          : String(e);
        say("Python could not start here (" + why + "); the answer shown was computed when the book was built.");
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
