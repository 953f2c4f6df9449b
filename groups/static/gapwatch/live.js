// Live parts of a page: every element with data-live-url is replaced by that
// URL's fragment (rendered by Django, autoescaped) every data-live-every ms,
// while the tab is visible. A fragment holding [data-live-done] (a job that
// finished) ends the refresh. Nothing is replaced while focus is inside, so a
// refresh never takes a button from under the keyboard.
(function () {
  "use strict";
  document.querySelectorAll("[data-live-url]").forEach(function (element) {
    var every = parseInt(element.getAttribute("data-live-every"), 10) || 5000;
    var timer = setInterval(refresh, every);
    function refresh() {
      if (document.hidden || element.contains(document.activeElement)) return;
      fetch(element.getAttribute("data-live-url"), {
        credentials: "same-origin", headers: { "X-Requested-With": "fetch" }
      })
        .then(function (response) { return response.ok ? response.text() : null; })
        .then(function (html) {
          if (html === null || element.contains(document.activeElement)) return;
          element.innerHTML = html;
          if (element.querySelector("[data-live-done]")) clearInterval(timer);
        })
        .catch(function () { /* the next tick tries again */ });
    }
  });
})();
