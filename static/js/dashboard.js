/* The audit dashboard: polls the JSON feed (data-url) every data-poll-ms and updates in place.
   No inline script: everything the page needs comes from data-* attributes and the feed. */
(function () {
  "use strict";

  var root = document.getElementById("dashboard");
  if (!root) return;
  var url = root.dataset.url;
  var pollMs = parseInt(root.dataset.pollMs, 10) || 2000;

  var NUMBERS = ["level_noise", "pattern_noise_orig", "pattern_noise_mod", "system_noise_orig", "system_noise_mod", "residual"];
  var NAMES = {
    level_noise: "LN", pattern_noise_orig: "PN orig", pattern_noise_mod: "PN mod",
    system_noise_orig: "SN orig", system_noise_mod: "SN mod", residual: "residual"
  };
  var COLORS = ["#2856c8", "#c0392b", "#e67e22", "#1e7a3c", "#8e44ad", "#5d6675", "#16a085", "#d4ac0d", "#7f8c8d", "#2c3e50", "#a04000"];

  var state = { haveFull: -1, report: null, workers: [], sort: { key: "labels", desc: true }, charts: {} };

  function $(id) { return document.getElementById(id); }
  function fmt(x, digits) {
    if (x === null || x === undefined || Number.isNaN(x)) return "—";
    return Number(x).toFixed(digits === undefined ? 4 : digits);
  }
  function seconds(s) {
    if (s === null || s === undefined) return "—";
    if (s < 90) return Math.max(0, Math.round(s)) + " s";
    if (s < 5400) return Math.round(s / 60) + " min";
    return (s / 3600).toFixed(1) + " h";
  }
  function clock(iso) { return iso ? new Date(iso).toLocaleTimeString() : "—"; }
  function text(el, value) { if (el) el.textContent = value; }
  function el(tag, content, cls) {
    var node = document.createElement(tag);
    if (content !== undefined && content !== null) node.textContent = content;
    if (cls) node.className = cls;
    return node;
  }

  /* ---------------------------------------------------------------- charts */
  function axis(title, extra) {
    var a = { title: { display: true, text: title } };
    for (var k in (extra || {})) a[k] = extra[k];
    return a;
  }
  function chart(id, config) {
    if (typeof Chart === "undefined") return null;
    var existing = state.charts[id];
    if (existing) {
      existing.data = config.data;
      existing.options.scales = config.options.scales;
      existing.update("none");
      return existing;
    }
    config.options.responsive = true;
    config.options.maintainAspectRatio = false;
    config.options.animation = false;
    state.charts[id] = new Chart($(id), config);
    return state.charts[id];
  }
  function lineSets(rows, x) {
    return NUMBERS.map(function (k, i) {
      return {
        label: NAMES[k], borderColor: COLORS[i], backgroundColor: COLORS[i], pointRadius: 0, borderWidth: 2,
        spanGaps: false,
        data: rows.map(function (r) { return { x: x(r), y: r[k] === undefined ? null : r[k] }; })
      };
    });
  }

  function drawHistory(history) {
    chart("chart-history", {
      type: "line",
      data: { datasets: lineSets(history, function (r) { return r.watermark; }) },
      options: {
        parsing: false,
        scales: { x: axis("labels audited", { type: "linear", beginAtZero: true }), y: axis("noise (SD, unit scale)", { beginAtZero: true }) },
        plugins: { tooltip: { mode: "nearest", intersect: false } }
      }
    });
  }

  function drawSweep(kind, sweep) {
    if (!sweep) return;
    var rows = sweep.threshold.map(function (t, i) {
      var r = { t: t };
      NUMBERS.forEach(function (k) { r[k] = sweep[k][i]; });
      return r;
    });
    var word = kind === "min" ? "at least" : "at most";
    chart("chart-" + kind + "-noise", {
      type: "line",
      data: { datasets: lineSets(rows, function (r) { return r.t; }) },
      options: {
        parsing: false,
        scales: { x: axis("threshold t: keep workers with " + word + " t labels", { type: "linear" }), y: axis("noise (SD)", { beginAtZero: true }) }
      }
    });
    var keys = Object.keys(sweep.prompt_distribution);
    chart("chart-" + kind + "-prompts", {
      type: "bar",
      data: {
        labels: sweep.threshold,
        datasets: keys.map(function (key, i) {
          return { label: key + " label" + (key === "1" ? "" : "s") + " left", data: sweep.prompt_distribution[key],
                   backgroundColor: COLORS[i % COLORS.length], stack: "prompts" };
        })
      },
      options: {
        scales: { x: axis("threshold t", { stacked: true }), y: axis("prompts", { stacked: true, beginAtZero: true }) }
      }
    });
  }

  function drawAccuracy(report) {
    var rows = (report && report.accuracy) || [];
    chart("chart-accuracy", {
      type: "bar",
      data: {
        labels: rows.map(function (r) { return r.worker; }),
        datasets: [
          { type: "bar", label: "95 % Wilson interval", data: rows.map(function (r) { return r.ci_wilson; }),
            backgroundColor: "rgba(40, 86, 200, 0.35)", borderColor: "#2856c8", borderWidth: 1, order: 2 },
          { type: "line", label: "accuracy", data: rows.map(function (r) { return r.accuracy; }), showLine: false,
            pointRadius: 3, borderColor: "#1d2330", backgroundColor: "#1d2330", order: 1 }
        ]
      },
      options: {
        scales: { x: axis("worker (most labels first)", { ticks: { autoSkip: true, maxRotation: 60 } }),
                  y: axis("leave-one-out accuracy", { min: 0, max: 1 }) }
      }
    });
  }

  function drawScatter(report) {
    if (!report) return;
    var noise = $("scatter-noise").value;
    var acc = {};
    (report.accuracy || []).forEach(function (r) { acc[r.worker] = r.accuracy; });
    var points = (report.worker_noise || []).filter(function (w) {
      return acc[w.worker] !== undefined && w[noise] !== null;
    }).map(function (w) { return { x: w[noise], y: acc[w.worker], worker: w.worker }; });
    var reg = ((report.noise_vs_accuracy || {}).loo_mode || {})[noise];
    var datasets = [{ type: "scatter", label: "workers", data: points, backgroundColor: "#2856c8" }];
    if (reg && reg.slope !== null && points.length) {
      var xs = points.map(function (p) { return p.x; });
      var lo = Math.min.apply(null, xs), hi = Math.max.apply(null, xs);
      datasets.push({ type: "line", label: "least squares", pointRadius: 0, borderColor: "#c0392b", borderWidth: 2,
                      data: [{ x: lo, y: reg.intercept + reg.slope * lo }, { x: hi, y: reg.intercept + reg.slope * hi }] });
      text($("regression-text"), "accuracy = " + fmt(reg.intercept) + " + " + fmt(reg.slope) + " × noise; r² = " +
           fmt(reg.r2, 3) + ", F = " + fmt(reg.f, 2) + ", p = " + fmt(reg.p, 4) + ", n = " + reg.n + " workers.");
    } else {
      text($("regression-text"), reg && reg.reason ? "No regression: " + reg.reason : "No regression yet.");
    }
    chart("chart-scatter", {
      type: "scatter",
      data: { datasets: datasets },
      options: { scales: { x: axis(NAMES[noise] + " on the worker's prompts", { type: "linear" }), y: axis("leave-one-out accuracy", { min: 0, max: 1 }) } }
    });
  }

  /* ---------------------------------------------------------------- tables and text */
  function drawFreshness(d) {
    var s = d.status, cheap = d.cheap, box = $("freshness");
    box.classList.toggle("stale", !!s.stale);
    box.dataset.stale = s.stale ? "true" : "false";
    if (!cheap) {
      text(box, s.labels ? (s.labels + " labels, not audited yet" + (s.stale ? " — stale since " + clock(s.stale_since) : "…")) : "No labels yet.");
      return;
    }
    var age = (new Date(d.now) - new Date(cheap.computed_at)) / 1000;
    var msg = "Numbers from " + seconds(age) + " ago (" + clock(cheap.computed_at) + "), including ";
    box.textContent = "";
    box.appendChild(document.createTextNode(msg));
    var audited = el("strong", String(cheap.watermark));
    audited.id = "audited-labels";
    box.appendChild(audited);
    box.appendChild(document.createTextNode(" of " + s.labels + " labels."));
    if (s.stale) {
      var since = (new Date(d.now) - new Date(s.stale_since)) / 1000;
      box.appendChild(el("span", " Stale since " + clock(s.stale_since) + " (" + seconds(since) + "): " + s.behind +
        " labels are not audited yet. The task queue may be down; the audit catches up by itself when it is back.", "stale-note"));
    } else if (s.behind) {
      box.appendChild(el("span", " Recomputing (" + s.behind + " new)…", "muted"));
    }
    var f = d.full;
    text($("full-freshness"), f ? "Full audit (accuracy, filters, agreement) from " + clock(f.computed_at) + " on " + f.watermark +
      " labels, computed in " + fmt(f.duration_ms / 1000, 1) + " s." : "No full audit yet (accuracy, filters, agreement).");
    $("download-json").hidden = !f;
    $("download-md").hidden = !f;
  }

  function drawNumbers(cheap) {
    if (!cheap) return;
    NUMBERS.forEach(function (k) {
      var cell = document.querySelector('[data-number="' + k + '"]');
      var v = cheap[k];
      cell.textContent = v === null ? "undefined" : fmt(v);
      cell.title = v === null ? ((cheap.reasons || {})[k] || "") : "";
    });
    text($("sd-convention"), cheap.sd);
    text($("counts"), cheap.n_workers + " workers, " + cheap.n_prompts + " prompts, " + cheap.n_labels +
      " unit labels audited; " + cheap.n_invalid + " invalid (outside the binarization map, not audited).");
    var p = cheap.progress;
    $("progress").max = p.labels_wanted || 1;
    $("progress").value = p.labels;
    text($("progress-text"), p.labels + " of " + p.labels_wanted + " labels (" + fmt(p.percent, 0) + " %) · " +
      p.prompts_complete + " of " + p.n_prompts + " prompts complete (k = " + p.k + ")");
    if (cheap.partitions) {
      var parts = Object.keys(cheap.partitions).map(function (dd) { return "minority " + dd + ": " + cheap.partitions[dd]; });
      text($("partitions"), "Prompts with k = " + p.k + " labels by minority count — " + parts.join(", ") + ".");
    }
  }

  function sortWorkers() {
    var key = state.sort.key, desc = state.sort.desc;
    return state.workers.slice().sort(function (a, b) {
      var x = a[key], y = b[key];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      var c = x < y ? -1 : 1;
      return desc ? -c : c;
    });
  }

  function drawWorkers() {
    var body = $("workers-body");
    var rows = sortWorkers();
    body.textContent = "";
    if (!rows.length) {
      var empty = el("tr"); var td = el("td", "No labels yet.", "muted"); td.colSpan = 6; empty.appendChild(td); body.appendChild(empty);
      return;
    }
    rows.forEach(function (w) {
      var tr = el("tr");
      tr.appendChild(el("td", w.worker));
      tr.appendChild(el("td", String(w.labels), "num"));
      tr.appendChild(el("td", fmt(w.mean, 3), "num"));
      tr.appendChild(el("td", w.accuracy === null ? "—" : fmt(w.accuracy, 3) + " (N = " + w.n_scored + ")", "num"));
      tr.appendChild(el("td", w.ci_wilson ? fmt(w.ci_wilson[0], 3) + "–" + fmt(w.ci_wilson[1], 3) : "—"));
      var flag = w.outlier ? "outlier" : (w.accuracy !== null && w.underpowered ? "underpowered" : "");
      tr.appendChild(el("td", flag, w.outlier ? "flag-outlier" : "muted"));
      body.appendChild(tr);
    });
  }

  function drawAmbiguous(units) {
    var list = $("ambiguous");
    list.textContent = "";
    if (!units.length) { list.appendChild(el("li", "None yet: a prompt needs two labels.", "muted")); return; }
    units.forEach(function (u) {
      var li = el("li");
      li.appendChild(el("strong", u.unit));
      li.appendChild(document.createTextNode(" " + u.text + " "));
      var labels = u.labels.map(function (l) { return l.value + (l.unit === null ? " (invalid)" : ""); }).join(", ");
      li.appendChild(el("span", "— " + u.count + " labels, mean " + fmt(u.mean, 2) + ": " + labels, "muted"));
      list.appendChild(li);
    });
  }

  function drawAgreement(report) {
    var body = $("agreement-body");
    var ag = (report && report.agreement) || null;
    if (!ag) return;
    body.textContent = "";
    Object.keys(ag).forEach(function (k) {
      var v = ag[k];
      if (!v || typeof v !== "object" || !("value" in v)) return;
      var tr = el("tr");
      tr.appendChild(el("td", v.name || k));
      tr.appendChild(el("td", v.value === null ? "undefined: " + (v.reason || "") : fmt(v.value, 3), "num"));
      body.appendChild(tr);
    });
  }

  function drawFull(full) {
    if (!full || !full.report) return;
    state.haveFull = full.watermark;
    state.report = full.report;
    drawAccuracy(full.report);
    drawScatter(full.report);
    var filters = full.report.filters || {};
    drawSweep("min", filters.min);
    drawSweep("max", filters.max);
    drawAgreement(full.report);
  }

  function render(d) {
    drawFreshness(d);
    drawNumbers(d.cheap);
    drawHistory(d.history || []);
    state.workers = d.workers || [];
    drawWorkers();
    drawAmbiguous(d.ambiguous || []);
    drawFull(d.full);
    root.dataset.watermark = d.cheap ? String(d.cheap.watermark) : "0";
  }

  function poll() {
    fetch(url + "?have_full=" + state.haveFull, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (d) { render(d); root.dataset.error = ""; })
      .catch(function (err) {
        root.dataset.error = String(err);
        text($("full-freshness"), "Could not reach Chorus (" + err.message + "); retrying…");
      })
      .then(function () { window.setTimeout(poll, pollMs); });
  }

  document.querySelectorAll("button.sort").forEach(function (b) {
    b.addEventListener("click", function () {
      var key = b.dataset.sort;
      state.sort = { key: key, desc: state.sort.key === key ? !state.sort.desc : key !== "worker" };
      drawWorkers();
    });
  });
  $("scatter-noise").addEventListener("change", function () { drawScatter(state.report); });
  poll();
})();
