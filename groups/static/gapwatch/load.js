// Parts of a page read on demand once the page is shown: every element with
// data-load-url gets that URL's fragment (rendered by Django, autoescaped)
// once. Without scripts, the element's own link opens the same part as a page.
(function () {
  "use strict";
  document.querySelectorAll("[data-load-url]").forEach(function (element) {
    element.setAttribute("aria-busy", "true");
    fetch(element.getAttribute("data-load-url"), {
      credentials: "same-origin", headers: { "X-Requested-With": "fetch" }
    })
      .then(function (response) { return response.text(); })
      .then(function (html) { element.innerHTML = html; })
      .catch(function () { element.insertAdjacentHTML("beforeend", "<p class=\"error\">The broker's answer did not arrive: follow the link to try again.</p>"); })
      .finally(function () { element.removeAttribute("aria-busy"); });
  });
})();
