"""The script behind the book's live widgets (``_static/live/live.js``, written by
:func:`minitorch_dist.viz.live_html.write_assets`).

It finds every ``[data-live]`` element of the page. When one scrolls into view or a control is
first touched it starts the book's own Pyodide (``_static/vendor/pyodide/``, no network beyond
the book's folder) in a Web Worker, so the page never freezes, not while Python starts nor while
it ranks, and imports :mod:`minitorch_dist.viz.live` there. The same code runs from http:// and
from ``file://`` (a book opened by double-clicking ``index.html``), where Chromium refuses
``fetch()``, ES-module imports and module workers: Pyodide's files and ``minitorch_dist.zip``
come as classic scripts (``<name>.js``, :func:`minitorch_dist.viz.live_data.data_script`) whose
contents the page posts to a classic worker made from a ``blob:`` URL; there ``pyodide.js`` is
evaluated (with ``importScripts`` hidden: it refuses classic workers, which it does not need
here), ``pyodide.asm.mjs`` is imported from a ``blob:`` URL of its text, and while Pyodide
starts a ``fetch`` shim answers its two requests (the ``.wasm``, the standard library) from
those bytes. Then, for the element's current controls, the worker steps through
:func:`~minitorch_dist.viz.live.live_steps` (the planner ranks a new problem in parts and the
page shows "part k of n, N configurations scored"; a ranking whose controls change meanwhile
stops at its next part) up to its ``live_result`` answer, renders it with ``render_live`` and posts the JSON and the HTML back; the page writes ``data-inputs``,
``data-result`` (the JSON Python produced, untouched) and the HTML. ``data-state`` goes
``static`` -> ``loading`` -> ``ready`` (``busy`` while an answer is computed, ``error`` if
Python could not start). No arithmetic here: the page shows what Python computed.
``window.minitorchLive`` holds ``seconds`` (Pyodide's start) and ``run(code)`` (a promise of
``runPython(code)`` in the worker, for benchmarks).
"""

LIVE_JS = r"""
(function () {
  "use strict";
  var here = document.currentScript ? document.currentScript.src.replace(/[?#].*$/, "") : "";
  var base = here.slice(0, here.lastIndexOf("/") + 1);
  var pyodideURL = new URL("../vendor/pyodide/", base).href;
  var files = self.minitorchLiveFiles = self.minitorchLiveFiles || {};
  var PYODIDE = ["pyodide.js", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json"];
  var booting = null;

  // The worker: its source is this function's text, run from a blob: URL.
  function worker() {
    var py = null, queue = Promise.resolve(), cancelled = {};
    function bytes(entry) {
      if (Uint8Array.fromBase64) return Uint8Array.fromBase64(entry.base64);
      var bin = atob(entry.base64), out = new Uint8Array(bin.length);
      for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
      return out;
    }
    async function start(msg) {
      var F = msg.files, index = msg.indexURL, served = {};
      served[index + "pyodide.asm.wasm"] = [bytes(F["pyodide.asm.wasm"]), "application/wasm"];
      served[index + "python_stdlib.zip"] = [bytes(F["python_stdlib.zip"]), "application/zip"];
      var realFetch = self.fetch;
      self.fetch = function (input, init) {
        var url = typeof input === "string" ? input : (input && input.url) || String(input);
        var hit = served[new URL(url, index).href];
        if (hit) return Promise.resolve(new Response(hit[0], {headers: {"Content-Type": hit[1]}}));
        return realFetch.apply(this, arguments);
      };
      var module = URL.createObjectURL(new Blob([F["pyodide.asm.mjs"].text], {type: "text/javascript"}));
      try {
        self.importScripts = undefined;  // pyodide.js refuses classic workers; it needs no import here
        (0, eval)(F["pyodide.js"].text);
        var create = (await import(module)).default;
        py = await self.loadPyodide({indexURL: index, createPyodideModule: create,
                                     lockFileContents: F["pyodide-lock.json"].text});
      } finally {
        self.fetch = realFetch;
        URL.revokeObjectURL(module);
      }
      py.unpackArchive(bytes(F["minitorch_dist.zip"]), "zip", {extractDir: "/home/pyodide/live"});
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
      return {};
    }
    function call(fn) {
      var proxy = fn(), out = proxy.toJs();
      proxy.destroy();
      return out;
    }
    async function answer(msg) {
      var job = py.globals.get("_live_job")(msg.kind, msg.inputs);
      try {
        for (;;) {
          if (cancelled[msg.id]) return {cancelled: true};  // its inputs changed meanwhile
          var out = call(job);
          if (out[1] !== null && out[1] !== undefined) return {result: out[0], html: out[1]};
          self.postMessage({id: msg.id, progress: JSON.parse(out[0])});
          await new Promise(function (r) { setTimeout(r, 0); });
        }
      } finally {
        job.destroy();
      }
    }
    self.onmessage = function (e) {
      var msg = e.data;
      if (msg.cancel) { cancelled[msg.cancel] = true; return; }  // read between parts
      queue = queue.then(function () {
        if (msg.start) return start(msg);
        if (msg.run) return {value: py.runPython(msg.run)};
        return answer(msg);
      }).then(function (out) {
        delete cancelled[msg.id];
        out.id = msg.id;
        self.postMessage(out);
      }, function (err) {
        self.postMessage({id: msg.id, error: String((err && err.stack) || err)});
      });
    };
  }

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

  function boot(say) {
    if (!booting) {
      booting = (async function () {
        var t0 = performance.now();
        say("starting Python (Pyodide, about 17 MB, from the book's own files)...");
        await Promise.all(PYODIDE.map(function (n) { return data(pyodideURL, n); })
                          .concat([data(base, "minitorch_dist.zip")]));
        var src = "(" + worker.toString() + ")();";
        var w = new Worker(URL.createObjectURL(new Blob([src], {type: "text/javascript"})));
        var pending = {}, next = 0;
        w.onmessage = function (e) {
          var m = e.data, p = pending[m.id];
          if (!p) return;
          if (m.progress) { p.progress(m.progress); return; }
          delete pending[m.id];
          if (m.error) p.reject(new Error(m.error)); else p.resolve(m);
        };
        w.onerror = function (e) {
          var err = new Error("the Python worker failed: " + (e.message || "it could not start"));
          Object.keys(pending).forEach(function (id) { pending[id].reject(err); delete pending[id]; });
        };
        function send(msg, progress, sent) {
          return new Promise(function (resolve, reject) {
            msg.id = ++next;
            if (sent) sent(msg.id);
            pending[msg.id] = {resolve: resolve, reject: reject, progress: progress || function () {}};
            w.postMessage(msg);
          });
        }
        var sent = {};
        PYODIDE.concat(["minitorch_dist.zip"]).forEach(function (n) { sent[n] = files[n]; });
        await send({start: true, files: sent, indexURL: pyodideURL});
        var live = {
          seconds: (performance.now() - t0) / 1000,
          ask: function (kind, values, progress, sent) {
            return send({kind: kind, inputs: JSON.stringify(values)}, progress, sent);
          },
          cancel: function (id) { w.postMessage({cancel: id}); },
          run: function (code) { return send({run: code}).then(function (m) { return m.value; }); },
        };
        window.minitorchLive = live;
        return live;
      })();
    }
    return booting;
  }

  function setup(el) {
    var kind = el.getAttribute("data-live");
    var selects = Array.prototype.slice.call(el.querySelectorAll("select[data-control]"));
    var status = el.querySelector(".live-status");
    var output = el.querySelector(".live-output");
    var running = false, again = false, asked = null;
    function say(text) { if (status) status.textContent = text; }
    function inputs() {
      var v = {};
      selects.forEach(function (s) { v[s.getAttribute("data-control")] = JSON.parse(s.value); });
      return v;
    }
    function seconds(ms) { return ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(1) + " s"; }
    async function answer() {
      if (running) {  // a newer answer is wanted: stop the one being computed at its next part
        again = true;
        if (asked !== null && window.minitorchLive) window.minitorchLive.cancel(asked);
        return;
      }
      running = true;
      try {
        do {
          again = false;
          var values = inputs();
          if (el.getAttribute("data-state") === "ready") el.setAttribute("data-state", "busy");
          var live = await boot(say);
          say(kind === "planner" ? "Python is ranking..." : "computing...");
          var t0 = performance.now();
          var out = await live.ask(kind, values, function (p) {
            say("Python is ranking every configuration of this problem: part " + p.done +
                " of " + p.parts + ", " + p.configurations.toLocaleString("en-US") +
                " configurations scored (" + seconds(performance.now() - t0) + ")...");
          }, function (id) { asked = id; });
          asked = null;
          if (again || out.cancelled) continue;  // a control changed meanwhile: answer the new values
          output.innerHTML = out.html;
          el.setAttribute("data-inputs", JSON.stringify(values));
          el.setAttribute("data-result", out.result);
          say("computed in this page by minitorch_dist's own Python (Pyodide) in " +
              seconds(performance.now() - t0) + ".");
        } while (again);
        el.setAttribute("data-state", "ready");
      } catch (e) {
        el.setAttribute("data-state", "error");
        say("Python could not start here (" + String(e).split("\n")[0] + "); the answer shown was computed when the book was built.");
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
