// Times in the viewer's time zone. The server writes every time in UTC through one
// filter (groups/templatetags/gapwatch.py, ``when``): <time datetime data-when> with
// "2026-11-25 08:01:40 UTC" and the relative time beside it. This rewrites them in
// the zone the person chose on their account page, else the browser's zone
// ("2026-11-25 09:01:40 GMT+1"), keeps the UTC time on hover, brings the relative
// times up to date every 30 s, and does the same for parts of a page that live.js
// replaces.
(function () {
  "use strict";
  var UNITS = [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]];
  var options = {
    year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit",
    hourCycle: "h23", timeZoneName: "short"
  };
  // The person's own zone (their account page's setting), else the browser's.
  var chosen = document.documentElement.getAttribute("data-time-zone");
  var parts;
  try {
    parts = new Intl.DateTimeFormat(undefined, chosen ? Object.assign({ timeZone: chosen }, options) : options);
  } catch (error) {
    parts = new Intl.DateTimeFormat(undefined, options);  // a zone this browser does not know
  }

  // The server's relative(): the largest whole unit, "just now", "12 s ago", "in 3 h".
  function relative(moment, now) {
    var seconds = Math.trunc((now - moment) / 1000);
    if (Math.abs(seconds) < 1) return "just now";
    for (var i = 0; i < UNITS.length; i++) {
      if (Math.abs(seconds) >= UNITS[i][0]) {
        var amount = Math.floor(Math.abs(seconds) / UNITS[i][0]);
        return seconds > 0 ? amount + " " + UNITS[i][1] + " ago" : "in " + amount + " " + UNITS[i][1];
      }
    }
    return "just now";
  }

  function local(moment, precise) {
    var p = {};
    parts.formatToParts(moment).forEach(function (part) { p[part.type] = part.value; });
    var text = p.year + "-" + p.month + "-" + p.day + " " + p.hour + ":" + p.minute + ":" + p.second;
    if (precise) text += "." + String(moment.getMilliseconds()).padStart(3, "0");
    return text + " " + p.timeZoneName;
  }

  function show(root) {
    var now = Date.now();
    root.querySelectorAll("time[data-when]").forEach(function (element) {
      var moment = new Date(element.getAttribute("datetime"));
      if (isNaN(moment)) return;
      var mode = element.getAttribute("data-when");
      var at = element.querySelector(".at"), ago = element.querySelector(".ago");
      if (mode === "ago") {
        element.firstChild.textContent = relative(moment, now);
        element.querySelector(".visually-hidden").textContent = " (" + local(moment, false) + ")";
        return;
      }
      if (at && !element.hasAttribute("data-local")) {
        at.textContent = local(moment, mode === "ms");
        element.setAttribute("data-local", "");
      }
      if (ago) ago.textContent = " (" + relative(moment, now) + ")";
    });
  }

  show(document);
  setInterval(function () { show(document); }, 30000);
  // Fragments live.js puts in place come from the server in UTC again.
  new MutationObserver(function (changes) {
    changes.forEach(function (change) {
      change.addedNodes.forEach(function (node) {
        if (node.nodeType === Node.ELEMENT_NODE) show(node.matches("time[data-when]") ? node.parentNode : node);
      });
    });
  }).observe(document.body, { childList: true, subtree: true });
})();
