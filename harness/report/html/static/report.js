// The report's behaviour: an episode's body is kept as inert text until it is opened (a page of
// thousands of episodes loads fast), and in a report file the filters and search run here.
(function () {
  "use strict";

  function fill(details) {
    details.querySelectorAll("[data-fill]").forEach(function (target) {
      if (target.childElementCount) { return; }
      var source = document.getElementById(target.dataset.fill);
      if (source) { target.innerHTML = source.textContent; }
    });
  }

  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (details.open && details.classList && (details.classList.contains("ep") ||
        details.classList.contains("pair"))) {
      fill(details);
    }
  }, true);

  if (document.body.dataset.mode !== "report") { return; }

  var texts = {};
  function plain(id) {
    if (!(id in texts)) {
      var source = document.getElementById(id);
      var html = source ? source.textContent : "";
      texts[id] = html.replace(/<[^>]*>/g, " ").replace(/&lt;/g, "<").replace(/&gt;/g, ">")
        .replace(/&#34;/g, "\"").replace(/&#39;/g, "'").replace(/&amp;/g, "&").toLowerCase();
    }
    return texts[id];
  }

  function apply(form) {
    var values = {};
    new FormData(form).forEach(function (value, name) { values[name] = String(value).trim(); });
    var list = document.getElementById(form.dataset.list);
    var shown = 0, total = 0, needle = (values.q || "").toLowerCase();
    list.querySelectorAll("details.ep").forEach(function (row) {
      var d = row.dataset;
      var ok = (!values.variant || d.variant === values.variant) &&
        (!values.task || d.task === values.task) &&
        (!values.tag || (" " + d.tags + " ").indexOf(" " + values.tag + " ") >= 0) &&
        (!values.verdict || d.verdict === values.verdict) &&
        (!values.end_reason || d.end === values.end_reason) &&
        (!needle || plain("x-" + d.key).indexOf(needle) >= 0);
      row.hidden = !ok;
      total += 1;
      if (ok) { shown += 1; }
    });
    var count = form.querySelector(".count");
    if (count) { count.textContent = shown + " of " + total + " episodes shown"; }
  }

  document.querySelectorAll("form.filters[data-list]").forEach(function (form) {
    form.addEventListener("submit", function (event) { event.preventDefault(); apply(form); });
    form.addEventListener("change", function () { apply(form); });
    form.addEventListener("input", function () { apply(form); });
    form.addEventListener("reset", function () { setTimeout(function () { apply(form); }, 0); });
  });
})();
