// Live refresh of the findings table without a full reload. Pauses while the
// operator has findings selected, so a refresh never drops a selection.
(function () {
  "use strict";
  var container = document.getElementById("findings-table");
  if (!container) return;
  function selected() {
    return container.querySelectorAll("input[name=ids]:checked").length;
  }
  function refresh() {
    if (selected() > 0 || document.hidden) return;
    // Read each time: filtering as one types (filter.js) points it at the new filters.
    fetch(container.getAttribute("data-refresh-url"), { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        // The fragment is rendered by Django with autoescaping; it replaces our own markup only.
        if (html !== null && selected() === 0) container.innerHTML = html;
      })
      .catch(function () { /* the next tick tries again */ });
  }
  setInterval(refresh, 5000);
  document.querySelectorAll("[data-needs-selection]").forEach(function (button) {
    button.addEventListener("click", function (event) {
      if (selected() === 0) {
        event.preventDefault();
        alert("Select one or more findings first.");
      }
    });
  });
})();
