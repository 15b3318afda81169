// Live updates: the server says "changed" on its event stream; the page fetches itself
// again and swaps the part that shows state (#live), so forms being filled in stay.
(function () {
  "use strict";
  var live = document.getElementById("live");
  document.addEventListener("submit", function (ev) {
    var b = ev.submitter;
    if (b && b.dataset.confirm && !window.confirm(b.dataset.confirm)) ev.preventDefault();
  });
  if (!live || !window.EventSource) return;
  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        var cur = document.getElementById("live");
        if (fresh && cur) cur.replaceWith(document.importNode(fresh, true));
      })
      .catch(function () {})
      .finally(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  var es = new EventSource("/events");
  es.addEventListener("changed", refresh);
})();
