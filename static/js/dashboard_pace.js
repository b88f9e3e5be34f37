/* The time to completion on the dashboard, as the campaign page says it: the campaign's progress API
   (labels a minute over the last 30 minutes, seconds left at that rate), read at most every 30 s and
   only while the dashboard draws (it draws only while seen). Hooks into the sections dashboard.js
   offers (window.chorusDashboard). */
(function () {
  "use strict";

  var dashboard = window.chorusDashboard;
  var node = document.getElementById("pace");
  if (!dashboard || !node) return;
  var EVERY_MS = 30000;
  var last = 0;

  function duration(seconds) {
    var minutes = Math.round(seconds / 60);
    if (minutes < 1) return "under a minute";
    if (minutes < 90) return minutes + " minute" + (minutes === 1 ? "" : "s");
    var hours = Math.round(minutes / 60);
    if (hours < 48) return hours + " hours";
    return Math.round(hours / 24) + " days";
  }

  function say(p) {
    var window_ = Math.round(p.window_minutes);
    var over = "the last " + window_ + " minute" + (window_ === 1 ? "" : "s");
    if (p.labels_per_minute === null) { node.textContent = ""; return; }
    if (p.eta_seconds !== null) {
      node.textContent = "Done in about " + duration(p.eta_seconds) + " at the pace of " + over + " (" +
        p.labels_per_minute.toFixed(1) + " labels a minute).";
    } else if (p.labels < p.labels_wanted) {
      node.textContent = "No labels in " + over + ": no time to completion to go by.";
    } else {
      node.textContent = "";
    }
  }

  function read() {
    fetch(node.dataset.progressUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(say)
      .catch(function () {  // the dashboard draws only when its numbers change: try again on our own
        last = 0;
        if (!document.hidden) window.setTimeout(read, 2000);
      });
  }

  dashboard.sections.push(function () {
    var now = Date.now();
    if (now - last < EVERY_MS) return;
    last = now;
    read();
  });
})();
