// Filter as you type: a form with data-filter-as-you-type asks the server for
// the page its filters make, 300 ms after the last keystroke (or at once when
// a select or box changes), puts the new page's [data-filter-results] parts
// in place of this page's (the rows, the pager, the errors: rendered by Django,
// autoescaped) and writes the filters in the address, so pagination, a reload
// and a shared link keep them. The form's button does the same without scripts.
// A form with data-submit-on-change (the cluster switcher) is sent on change.
(function () {
  "use strict";
  document.querySelectorAll("form[data-submit-on-change]").forEach(function (form) {
    form.addEventListener("change", function () { form.submit(); });
  });
  document.querySelectorAll("form[data-filter-as-you-type]").forEach(function (form) {
    var timer = null, latest = 0;
    function query() {
      var params = new URLSearchParams();
      new FormData(form).forEach(function (value, name) {
        if (value !== "" && name !== "page") params.append(name, value);
      });
      return params.toString();
    }
    function apply(html, asked) {
      var fresh = new DOMParser().parseFromString(html, "text/html");
      document.querySelectorAll("[data-filter-results][id]").forEach(function (part) {
        var replacement = fresh.getElementById(part.id);
        if (!replacement) return;
        Array.prototype.forEach.call(replacement.attributes, function (attribute) {
          if (attribute.name.indexOf("data-") === 0) part.setAttribute(attribute.name, attribute.value);
        });
        part.innerHTML = replacement.innerHTML;
      });
      history.replaceState(null, "", asked);
    }
    function send() {
      var number = ++latest;
      var asked = (form.getAttribute("action") || location.pathname).split("?")[0] + (query() ? "?" + query() : "");
      form.setAttribute("aria-busy", "true");
      fetch(asked, { credentials: "same-origin", headers: { "X-Requested-With": "filter" } })
        .then(function (response) { return response.text(); })  // a 400 page carries its errors
        .then(function (html) { if (number === latest) apply(html, asked); })
        .catch(function () { /* the button still works */ })
        .finally(function () { if (number === latest) form.removeAttribute("aria-busy"); });
    }
    form.addEventListener("input", function (event) {
      if (event.target.tagName !== "INPUT" || event.target.type === "checkbox") return;
      clearTimeout(timer);
      timer = setTimeout(send, 300);
    });
    form.addEventListener("change", function (event) {
      if (event.target.tagName === "SELECT" || event.target.type === "checkbox" || event.target.type === "date") {
        clearTimeout(timer);
        send();
      }
    });
  });
})();
