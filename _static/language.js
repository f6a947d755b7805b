/* The language switch: every page of the book names its twin in the other language in a
   <meta name="mt-lang-switch"> (minitorch_dist/course/i18n_book.py); this puts a link to it at
   the start of the page's header buttons ("中文" on an English page, "English" on a Chinese
   one). The browser check (minitorch_dist/course/browser_check_page.py) follows it. */
(function () {
  "use strict";
  function add() {
    var meta = document.querySelector('meta[name="mt-lang-switch"]');
    if (!meta || document.querySelector("a.mt-lang-switch")) return;
    var link = document.createElement("a");
    link.className = "mt-lang-switch btn btn-sm";
    link.href = meta.getAttribute("content");
    // "EN" or "中文": short enough for a phone's header row
    var label = meta.getAttribute("data-label");
    link.textContent = label === "English" ? "EN" : label;
    link.title = label;
    link.setAttribute("hreflang", meta.getAttribute("data-label") === "English" ? "en" : "zh-CN");
    // first of the page's header buttons (repository, download, full screen, theme)
    var place = document.querySelector(".article-header-buttons") ||
      document.querySelector(".header-article-items__end") || document.body;
    place.insertBefore(link, place.firstChild);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", add);
  else add();
})();
