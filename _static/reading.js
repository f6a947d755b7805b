/* The book's own reading fixes, linked into every page by Jupyter Book (every .js in _static/):
   - a table cell holding a number and its unit ("262.8 GiB", "3,381 of 11,593"), a single
     short word ("llama-3-8b") or a short label is marked .mt-nowrap, so it stays on one line
     (reading.css);
   - a long path in a table cell may break after its "/", a long name after its "." and "_"
     and between the words of a CamelCase name;
   - every figure (a picture in a figure or in a cell's output) is wrapped in a link to its own
     file, so a reader can open it at full size (a phone shows it 358 px wide otherwise).
   The browser check (minitorch_dist/course/browser_check_layout.py) fails a page where either
   is missing. */
(function () {
  "use strict";
  var NUMBER = /^[-+\u2212~\u2248]?\d[\d.,]*(?:\s*\S+|\s+of\s+[\d.,]+)$/;

  function cells(root) {
    root.querySelectorAll("td, th").forEach(function (cell) {
      var text = cell.textContent.trim().replace(/\s+/g, " ");
      // a number and its unit, one short word ("llama-3-8b" broken at its hyphens reads badly),
      // or a short label ("dp8 tp8 pp1 sp"): a table with many such scrolls in its own box
      var short = text.length <= 24 && !/\s/.test(text);
      if (NUMBER.test(text) || short || (cell.tagName === "TD" && text.length <= 16)) {
        cell.classList.add("mt-nowrap");
      }
    });
  }

  // A long path in a table cell may break after its "/", a long name after its "." and "_" and
  // between the words of a CamelCase name (a <wbr>, which copying leaves out), so a lab's task
  // table does not push its descriptions off a phone.
  function breakable(root) {
    root.querySelectorAll("td code.literal").forEach(function (code) {
      if (code.textContent.length <= 16) return;
      var walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT), texts = [];
      for (var t = walker.nextNode(); t; t = walker.nextNode()) texts.push(t);
      texts.forEach(function (text) {
        var parts = /\//.test(code.textContent)  // a path breaks at its "/" only
          ? text.data.split(/(?<=\/)(?=[^\/])/) : text.data.split(/(?<=[._])(?=[^._])|(?<=[a-z])(?=[A-Z])/);
        if (parts.length < 2) return;
        var frag = document.createDocumentFragment();
        parts.forEach(function (part, i) {
          if (i) frag.appendChild(document.createElement("wbr"));
          frag.appendChild(document.createTextNode(part));
        });
        text.parentNode.replaceChild(frag, text);
      });
    });
  }

  function figures(root) {
    root.querySelectorAll("figure img, .cell_output img").forEach(function (img) {
      if (img.closest("a[href], [data-live], .widget-subarea")) return;
      var src = img.getAttribute("src");
      if (!src || src.indexOf("data:") === 0) return;
      var link = document.createElement("a");
      link.href = src;
      link.className = "mt-figure-link";
      link.target = "_blank";
      link.rel = "noopener";
      link.title = "Open the figure at full size";
      img.parentNode.insertBefore(link, img);
      link.appendChild(img);
    });
  }

  function all() {
    var root = document.querySelector("article.bd-article") || document.body;
    cells(root);
    breakable(root);
    figures(root);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", all);
  else all();
})();
