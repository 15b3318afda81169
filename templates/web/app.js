// Live updates: the server says "changed" on its event stream; the page fetches itself
// again and swaps the part that shows state (#live), so forms being filled in stay. The
// AO-Live header tells the server not to spend the one-time note on this fetch.
(function () {
  "use strict";
  var live = document.getElementById("live");
  document.addEventListener("submit", function (ev) {
    var b = ev.submitter;
    if (b && b.dataset.confirm && !window.confirm(b.dataset.confirm)) ev.preventDefault();
  });
  if (!live || !window.EventSource) return;
  var busy = false, again = false, pressed = 0, waiting = null;
  // A swap between a tap's press and its release would leave the tap on a button that is
  // no longer there, and the tap would do nothing: while a pointer is down the fresh part
  // waits, and goes in once the tap's click has run. A press never released (the pointer
  // left the window) stops holding updates back after two seconds.
  function held() { return pressed !== 0 && Date.now() - pressed < 2000; }
  function swap(fresh) {
    var cur = document.getElementById("live");
    if (!cur || cur.innerHTML === fresh.innerHTML) return;
    cur.replaceWith(document.importNode(fresh, true));
  }
  document.addEventListener("pointerdown", function () { pressed = Date.now(); }, true);
  function release() {
    pressed = 0;
    setTimeout(function () {
      if (held() || !waiting) return;
      var f = waiting;
      waiting = null;
      swap(f);
    }, 0);
  }
  document.addEventListener("pointerup", release, true);
  document.addEventListener("pointercancel", release, true);
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html", "AO-Live": "1" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        if (!fresh) return;
        if (held()) waiting = fresh; else swap(fresh);
      })
      .catch(function () {})
      .finally(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  var es = new EventSource("/events");
  es.addEventListener("changed", refresh);
})();
