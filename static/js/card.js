/* The instrument card: while a bootstrap run waits or resamples, polls its small JSON feed
   (data-poll-url on #bootstrap-controls) and shows the progress; once the run is done, writes its
   intervals into the cells marked data-interval (the strings the server prints on a reload).
   No inline script (the CSP forbids it): everything comes from data-* attributes and the feed. */
(function () {
  "use strict";

  var root = document.getElementById("bootstrap-controls");
  if (!root) return;
  var url = root.dataset.pollUrl;
  var pollMs = parseInt(root.dataset.pollMs, 10) || 1000;
  var status = document.getElementById("bootstrap-status");
  var bar = document.getElementById("bootstrap-progress");
  var about = document.getElementById("bootstrap-about");
  var WAITING = { pending: true, running: true };

  function fill(display) {
    document.querySelectorAll("[data-interval]").forEach(function (cell) {
      var key = cell.getAttribute("data-interval");
      var value = key === "alpha" ? display.alpha : display.noise[key];
      cell.textContent = value === undefined ? "—" : value;
    });
    if (about) about.textContent = display.about;
  }

  function show(feed) {
    var latest = feed.latest;
    if (!latest) return false;
    if (WAITING[latest.status]) {
      bar.hidden = false;
      bar.max = latest.resamples;
      bar.value = latest.done_resamples;
      status.textContent = latest.status === "pending"
        ? "Waiting for a worker…"
        : "Resampling: " + latest.done_resamples + " of " + latest.resamples;
      return true;
    }
    bar.hidden = true;
    if (latest.status === "failed") {
      status.textContent = "The last bootstrap failed: " + latest.error;
    } else {
      status.textContent = "Done: " + latest.resamples + " resamples in " + (latest.duration_ms / 1000).toFixed(1) + " s.";
      fill(feed.display);
    }
    return false;
  }

  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (feed) {
        if (feed && show(feed)) window.setTimeout(poll, pollMs);
      })
      .catch(function () { window.setTimeout(poll, pollMs * 5); });
  }

  if (WAITING[root.dataset.latestStatus]) poll();
})();
