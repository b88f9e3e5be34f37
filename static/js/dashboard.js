/* The audit dashboard: polls the JSON feed (data-url) every data-poll-ms while the page is seen, and
   updates in place. No inline script: everything the page needs comes from data-* attributes and the feed.
   It asks for the delta feed (?since=<the token of its last answer>): only the pieces that changed
   come back (the history series as its new tail), and an unchanged feed answers 304 with no body
   (its ETag goes back in If-None-Match), so the page keeps what it has and only its clocks move on.
   A hidden page (another tab, a minimised window) polls nothing; seen again, it polls at once. */
(function () {
  "use strict";

  var root = document.getElementById("dashboard");
  if (!root) return;
  var url = root.dataset.url;
  var pollMs = parseInt(root.dataset.pollMs, 10) || 2000;

  var COLORS = ["#2856c8", "#c0392b", "#e67e22", "#1e7a3c", "#8e44ad", "#5d6675", "#16a085", "#d4ac0d", "#7f8c8d", "#2c3e50", "#a04000"];
  var FULL_CHARTS = ["chart-accuracy", "chart-scatter", "chart-min-noise", "chart-min-prompts", "chart-max-noise", "chart-max-prompts"];
  var EMPTY = {
    noLabels: "No labels yet — the charts appear after the first labels arrive.",
    noFull: "Waiting for the full audit: it starts with the first labels and reruns as they grow (“Recompute now” runs it at once).",
    noScored: "No worker can be scored yet: that needs prompts labeled by at least two other workers who do not tie."
  };
  // The y axes of a filter's two charts get the same width, so their shared threshold axes line up.
  var Y_AXIS_WIDTH = 64;

  // numbers: the six numbers as the feed names them ({key, name, short}), in the glossary's order.
  // feed: the feed as the page knows it, piece by piece (the delta feed's pieces merged in); since: its token.
  var state = { haveFull: -1, report: null, workers: [], numbers: [], sort: { key: "labels", desc: true }, charts: {},
                etag: null, since: "", feed: null, receivedAt: 0, unchanged: 0, timer: null, inFlight: false };

  function $(id) { return document.getElementById(id); }
  function fmt(x, digits) {
    if (x === null || x === undefined || Number.isNaN(x)) return "—";
    return Number(x).toFixed(digits === undefined ? 4 : digits);
  }
  // "1 worker", "2 workers": counts read as words, not as "1 workers" (plural: where "s" is not it).
  function count(n, word, plural) { return n + " " + (n === 1 ? word : (plural || word + "s")); }
  // A signed number as text is set: "−0.42" with a minus sign, not a hyphen.
  function minus(textValue) { return textValue.replace(/^-/, "\u2212"); }
  function seconds(s) {
    if (s === null || s === undefined) return "—";
    if (s < 90) return Math.max(0, Math.round(s)) + " s";
    if (s < 5400) return Math.round(s / 60) + " min";
    return (s / 3600).toFixed(1) + " h";
  }
  function clock(iso) { return iso ? new Date(iso).toLocaleTimeString() : "—"; }
  function text(node, value) { if (node) node.textContent = value; }
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
    emptyState(id, null);
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
  /* A chart area with nothing to draw says why instead of staying blank (message null: drawn). */
  function emptyState(id, message) {
    var note = document.querySelector('.chart-empty[data-chart="' + id + '"]');
    if (!note) return;
    note.hidden = !message;
    if (message) {
      text(note, message);
      if (state.charts[id]) { state.charts[id].destroy(); delete state.charts[id]; }
    }
  }
  function shortName(key) {
    var found = state.numbers.filter(function (n) { return n.key === key; })[0];
    return found ? found.short : key;
  }
  /* The six numbers as line series ({key, label}), in the glossary's order. */
  function noiseSeries() { return state.numbers.map(function (n) { return { key: n.key, label: n.short }; }); }
  /* The history chart's series, listed in this one place: each reads its key from every point of the
     feed's history (the keys of audits/selectors/feed.py's HISTORY_KEYS). */
  function historySeries() { return noiseSeries(); }
  function lineSets(series, rows, x) {
    return series.map(function (n, i) {
      return {
        // lines without points, except a lone point (a first snapshot), which a line cannot show
        label: n.label, borderColor: COLORS[i % COLORS.length], backgroundColor: COLORS[i % COLORS.length],
        pointRadius: rows.length > 1 ? 0 : 3, borderWidth: 2, spanGaps: false,
        data: rows.map(function (r) { return { x: x(r), y: r[n.key] === undefined ? null : r[n.key] }; })
      };
    });
  }

  function drawHistory(history) {
    chart("chart-history", {
      type: "line",
      data: { datasets: lineSets(historySeries(), history, function (r) { return r.watermark; }) },
      options: {
        parsing: false,
        scales: { x: axis("labels audited", { type: "linear", beginAtZero: true }), y: axis("noise: SD (residual: a variance, may be < 0)", { beginAtZero: true }) },
        plugins: { tooltip: { mode: "nearest", intersect: false } }
      }
    });
  }

  /* The threshold axis both charts of a filter share: the same bounds (half a step beyond the first
     and last threshold, so the end bars are whole) and the same integer ticks. */
  function thresholdAxis(title, thresholds, stacked) {
    var lo = thresholds[0], hi = thresholds[thresholds.length - 1];
    var step = Math.max(1, Math.ceil((hi - lo) / 10));
    return axis(title, { type: "linear", stacked: stacked, min: lo - 0.5, max: hi + 0.5, offset: false,
                         ticks: { stepSize: step, precision: 0, includeBounds: false } });
  }
  function fixedWidth(scale) { scale.width = Y_AXIS_WIDTH; }

  function drawSweep(kind, sweep) {
    if (!sweep || !sweep.threshold.length) {
      emptyState("chart-" + kind + "-noise", EMPTY.noLabels);
      emptyState("chart-" + kind + "-prompts", EMPTY.noLabels);
      return;
    }
    var rows = sweep.threshold.map(function (t, i) {
      var r = { t: t };
      state.numbers.forEach(function (n) { r[n.key] = sweep[n.key][i]; });
      return r;
    });
    var word = kind === "min" ? "at least" : "at most";
    chart("chart-" + kind + "-noise", {
      type: "line",
      data: { datasets: lineSets(noiseSeries(), rows, function (r) { return r.t; }) },
      options: {
        parsing: false,
        scales: { x: thresholdAxis("threshold t: keep workers with " + word + " t labels", sweep.threshold, false),
                  y: axis("noise (SD)", { beginAtZero: true, afterFit: fixedWidth }) }
      }
    });
    var keys = Object.keys(sweep.prompt_distribution);
    chart("chart-" + kind + "-prompts", {
      type: "bar",
      data: {
        datasets: keys.map(function (key, i) {
          return { label: key + " label" + (key === "1" ? "" : "s") + " left", backgroundColor: COLORS[i % COLORS.length],
                   stack: "prompts", barPercentage: 1, categoryPercentage: 0.9,
                   data: sweep.threshold.map(function (t, j) { return { x: t, y: sweep.prompt_distribution[key][j] }; }) };
        })
      },
      options: {
        scales: { x: thresholdAxis("threshold t", sweep.threshold, true),
                  y: axis("prompts", { stacked: true, beginAtZero: true, afterFit: fixedWidth }) }
      }
    });
  }

  function drawAccuracy(report) {
    var rows = (report && report.accuracy) || [];
    if (!rows.length) { emptyState("chart-accuracy", EMPTY.noScored); return; }
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
    if (!points.length) {
      emptyState("chart-scatter", EMPTY.noScored);
      text($("regression-text"), "");
      return;
    }
    var datasets = [{ type: "scatter", label: "workers", data: points, backgroundColor: "#2856c8" }];
    if (reg && reg.slope !== null) {
      var xs = points.map(function (p) { return p.x; });
      var lo = Math.min.apply(null, xs), hi = Math.max.apply(null, xs);
      datasets.push({ type: "line", label: "least squares", pointRadius: 0, borderColor: "#c0392b", borderWidth: 2,
                      data: [{ x: lo, y: reg.intercept + reg.slope * lo }, { x: hi, y: reg.intercept + reg.slope * hi }] });
      text($("regression-text"), "accuracy = " + minus(fmt(reg.intercept)) + (reg.slope < 0 ? " − " : " + ") +
           fmt(Math.abs(reg.slope)) + " × noise; r² = " + fmt(reg.r2, 3) + ", F = " + fmt(reg.f, 2) + ", p = " +
           fmt(reg.p, 4) + ", n = " + count(reg.n, "worker") + ".");
    } else {
      text($("regression-text"), reg && reg.reason ? "No regression: " + reg.reason : "No regression yet.");
    }
    chart("chart-scatter", {
      type: "scatter",
      data: { datasets: datasets },
      options: { scales: { x: axis(shortName(noise) + " on the worker's prompts", { type: "linear" }), y: axis("leave-one-out accuracy", { min: 0, max: 1 }) } }
    });
  }

  /* ---------------------------------------------------------------- tables and text */
  function drawFreshness(d) {
    var s = d.status, quick = d.quick, box = $("freshness");
    box.classList.toggle("stale", !!s.stale);
    box.dataset.stale = s.stale ? "true" : "false";
    if (!quick) {
      text(box, s.labels ? (count(s.labels, "label") + ", not audited yet" + (s.stale ? " — stale since " + clock(s.stale_since) : "…")) : "No labels yet.");
      return;
    }
    var age = (new Date(d.now) - new Date(quick.computed_at)) / 1000;
    var msg = "Numbers from " + seconds(age) + " ago (" + clock(quick.computed_at) + "), including ";
    box.textContent = "";
    box.appendChild(document.createTextNode(msg));
    var audited = el("strong", String(quick.watermark));
    audited.id = "audited-labels";
    box.appendChild(audited);
    box.appendChild(document.createTextNode(" of " + count(s.labels, "label") + "."));
    if (s.stale) {
      var since = (new Date(d.now) - new Date(s.stale_since)) / 1000;
      box.appendChild(el("span", " Stale since " + clock(s.stale_since) + " (" + seconds(since) + "): " +
        count(s.behind, "label is", "labels are") + " not audited yet. The task queue may be down; the audit catches up by itself when it is back.", "stale-note"));
    } else if (s.behind) {
      box.appendChild(el("span", " Recomputing (" + s.behind + " new)…", "muted"));
    }
    var f = d.full;
    if (d.free_text) {
      text($("full-freshness"), "No full audit: " + d.free_text.skip_reason + ".");
      return;
    }
    text($("full-freshness"), f ? "Full audit (accuracy, filters, agreement) from " + clock(f.computed_at) + " on " + count(f.watermark, "label") +
      ", computed in " + fmt(f.duration_ms / 1000, 1) + " s." : "No full audit yet (accuracy, filters, agreement).");
    $("download-json").hidden = !f;
    $("download-md").hidden = !f;
    $("download-parquet").hidden = !f;
  }

  function drawNumbers(quick) {
    if (!quick) return;
    state.numbers.forEach(function (n) {
      var cell = document.querySelector('[data-number="' + n.key + '"]');
      var v = quick[n.key];
      cell.textContent = v === null ? "undefined" : fmt(v);
      cell.title = v === null ? ((quick.reasons || {})[n.key] || "") : "";
    });
    text($("sd-convention"), quick.sd);
    text($("counts"), count(quick.n_workers, "worker") + ", " + count(quick.n_prompts, "prompt") + ", " +
      count(quick.n_labels, "label") + " audited (a per-option label counts once per option); " + quick.n_invalid +
      " invalid (outside the schema or the binarization map, not audited).");
    var p = quick.progress;
    $("progress").max = p.labels_wanted || 1;
    $("progress").value = p.labels;
    text($("progress-text"), p.labels + " of " + count(p.labels_wanted, "label") + " (" + fmt(p.percent, 0) + " %) · " +
      p.prompts_complete + " of " + count(p.n_prompts, "prompt") + " complete (k = " + p.k +
      (p.k_max ? " to " + p.k_max + ", adaptive: a prompt is complete when its stopping rule says so" : "") + ")");
    if (quick.partitions) {
      var parts = Object.keys(quick.partitions).map(function (dd) { return "minority " + dd + ": " + quick.partitions[dd]; });
      text($("partitions"), "Prompts with k = " + count(p.k, "label") + " by minority count — " + parts.join(", ") + ".");
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

  function interval(ci) { return ci ? fmt(ci[0], 3) + "–" + fmt(ci[1], 3) : "—"; }
  function signed(x) { return (x > 0 ? "+" : "") + minus(fmt(x, 2)); }
  /* A value and its detail (interval, N), which the table shows on a second, smaller line: the
     cell's text reads "value detail" (detail starts with a space). Without a value: "—". */
  function pair(value, detail) { return value === null ? ["—", ""] : [value, detail ? " " + detail : ""]; }
  function present(x) { return x !== null && x !== undefined; }
  function agreement(w) {
    return pair(present(w.accuracy) ? fmt(w.accuracy, 3) : null,
                "(N = " + w.n_scored + ")" + (w.ci_wilson ? " 95 %: " + interval(w.ci_wilson) : ""));
  }
  function goldAccuracy(w) { return pair(present(w.accuracy_gold) ? fmt(w.accuracy_gold, 3) : null, "(N = " + w.n_scored_gold + ")"); }
  function bias(w) {
    return pair(present(w.bias) ? signed(w.bias) : null,
                (w.bias_ci ? "[" + signed(w.bias_ci[0]) + ", " + signed(w.bias_ci[1]) + "] " : "") + "(N = " + w.n_compared + ")");
  }
  function topAnswer(w) {
    // A unit-scale answer (0.75 on a 0–10 scale without a map) keeps its decimals; 0/1 answers print as before.
    return pair(present(w.top_share) ? String(+w.top_value.toFixed(3)) + ": " + Math.round(w.top_share * 100) + " %" : null, "");
  }
  function controls(w) {
    return pair(present(w.control_accuracy) ? fmt(w.control_accuracy, 2) : null,
                w.control_ci ? "[" + fmt(w.control_ci[0], 2) + ", " + fmt(w.control_ci[1], 2) + "] (N = " + w.n_controls + ")" : "");
  }
  function pace(w) {
    return pair(present(w.median_seconds) ? fmt(w.median_seconds, 1) + " s" : null,
                present(w.speed_ratio) ? "(" + fmt(w.speed_ratio, 2) + "×)" : "");
  }
  /* A cell with its column's name, which a phone shows next to it (the table stacks there). */
  function cell(label, content, cls) {
    var td = el("td", content, cls);
    td.dataset.label = label;
    return td;
  }
  /* A cell of a value with its detail on a second line (``pair``). */
  function pairCell(label, parts, cls) {
    var td = cell(label, null, cls);
    td.appendChild(el("span", parts[0], "value"));
    if (parts[1]) td.appendChild(el("span", parts[1], "detail"));
    return td;
  }
  /* A flag: its name always in view, its sentence folded under it (the text goes on from the name when
     it starts with it: "straight-lining: answers 1 to…", "control accuracy 0.40 [0.17, 0.69] after…"). */
  var FLAG_NAMES = { straight_lining: "straight-lining", outlier: "outlier", underpowered: "underpowered",
                     control_accuracy: "control accuracy", too_fast: "too fast", excluded: "excluded" };
  function flag(f) {
    var box = el("details", null, "flag flag-" + f.kind.replace(/_/g, "-"));
    var name = FLAG_NAMES[f.kind] || f.kind.replace(/_/g, " ");
    var starts = f.text.slice(0, name.length) === name;
    box.appendChild(el("summary", name));
    box.appendChild(el("span", starts ? f.text.slice(name.length) : " — " + f.text, "flag-why"));
    return box;
  }

  // A worker's standing in the campaign now (the annotation app's): the badge's word, its field, its count's words.
  var STANDINGS = [["blocked", "blocked", "blocked"], ["excluded", "excluded_now", "excluded from the audit"], ["flagged", "flagged", "flagged"]];
  function standingCell(w) {
    var td = cell("", null, "worker-cell");
    var prefix = root.dataset.workerUrlPrefix;
    var name;
    if (prefix && present(w.worker_pk)) {
      name = el("a", w.worker, "worker-link value");
      name.href = prefix + w.worker_pk + "/";
    } else {
      name = el("span", w.worker, "value");
    }
    td.appendChild(name);
    STANDINGS.forEach(function (s) {
      if (!w[s[1]]) return;
      var badge = el("span", s[0], "badge badge-" + s[0]);
      if (s[0] === "flagged" && w.flag_reason) badge.title = w.flag_reason;
      td.appendChild(document.createTextNode(" "));
      td.appendChild(badge);
    });
    return td;
  }
  function drawStandingCounts(rows) {
    var parts = STANDINGS.map(function (s) {
      return [rows.filter(function (w) { return w[s[1]]; }).length, s[2]];
    }).filter(function (p) { return p[0]; }).map(function (p) { return p[0] + " " + p[1]; });
    text($("standing-counts"), rows.length ? count(rows.length, "worker") + (parts.length ? ": " + parts.join(", ") + "." : "; none blocked, excluded or flagged.") : "");
  }

  function drawWorkers() {
    var body = $("workers-body");
    var rows = sortWorkers();
    var gold = rows.some(function (w) { return present(w.accuracy_gold); });
    var control = rows.some(function (w) { return w.n_controls > 0; });
    var skill = rows.some(function (w) { return present(w.ds_skill); });
    document.querySelectorAll(".gold-only").forEach(function (node) { node.hidden = !gold; });
    document.querySelectorAll(".controls-only").forEach(function (node) { node.hidden = !control; });
    document.querySelectorAll(".skill-only").forEach(function (node) { node.hidden = !skill; });
    drawStandingCounts(rows);
    body.textContent = "";
    if (!rows.length) {
      var empty = el("tr"); var td = el("td", "No labels yet.", "muted"); td.colSpan = 11; empty.appendChild(td); body.appendChild(empty);
      return;
    }
    rows.forEach(function (w) {
      var tr = el("tr");
      tr.dataset.worker = w.worker;
      if (present(w.worker_pk)) tr.dataset.workerPk = String(w.worker_pk);
      tr.appendChild(standingCell(w));
      tr.appendChild(cell("labels", String(w.labels), "num"));
      tr.appendChild(cell("mean label", fmt(w.mean, 3), "num"));
      tr.appendChild(pairCell("agreement with others", agreement(w), "num"));
      if (gold) tr.appendChild(pairCell("accuracy vs gold", goldAccuracy(w), "num"));
      tr.appendChild(pairCell("bias (95 % interval)", bias(w), "num"));
      tr.appendChild(pairCell("most frequent answer", topAnswer(w), "num"));
      if (control) tr.appendChild(pairCell("control accuracy", controls(w), "num"));
      if (skill) tr.appendChild(cell("Dawid–Skene skill", present(w.ds_skill) ? fmt(w.ds_skill, 3) : "—", "num"));
      tr.appendChild(pairCell("time", pace(w), "num"));
      var flags = cell("", null, "flags");
      (w.flags || []).forEach(function (f) { flags.appendChild(flag(f)); });
      tr.appendChild(flags);
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
      var labels = u.labels.map(function (l) { return l.value + (l.scaled === null ? " (invalid)" : ""); }).join(", ");
      li.appendChild(el("span", "— " + count(u.count, "label") + ", mean " + fmt(u.mean, 2) + ": " + labels, "muted"));
      list.appendChild(li);
    });
  }

  /* The rows that apply (the feed leaves out those that would repeat others, and says why in the note). */
  function drawAgreement(rows, why) {
    if (!rows) return;
    var body = $("agreement-body");
    body.textContent = "";
    var note = $("agreement-note");
    note.hidden = !why;
    text(note, why || "");
    rows.forEach(function (r) {
      var tr = el("tr");
      tr.dataset.key = r.key;
      tr.appendChild(el("td", r.name));
      tr.appendChild(el("td", r.value === null ? "undefined: " + (r.reason || "") : fmt(r.value, 3), "num"));
      tr.appendChild(el("td", r.reading || "—", r.reading ? "reading reading-" + r.reading.replace(" ", "-") : "muted"));
      tr.appendChild(el("td", count(r.n_units, "prompt") + ", " + count(r.n_labels, "label")));
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
    drawAgreement(full.agreement, full.agreement_note);
    drawUnitScale(full.report.unit_scale);
  }

  /* A rating scale with a binarization map: the full audit's second view, the six numbers on the unit scale. */
  function drawUnitScale(unit) {
    var box = $("unit-scale-view");
    box.hidden = !unit;
    if (!unit) return;
    text(box, "On the " + unit.view + " (" + unit.scale + "), from the full audit on " + unit.n_labels + " labels: " +
      state.numbers.map(function (n) { return n.name + " " + (unit[n.key] === null ? "undefined" : fmt(unit[n.key])); }).join(", ") + ".");
  }

  /* A method's name as its checkbox says it (Dawid–Skene), for its key in the feed (dawid_skene). */
  function methodName(key) {
    var box = document.querySelector('#ground-truths input[name="methods"][value="' + key + '"]');
    var label = box && box.nextSibling ? box.nextSibling.textContent.trim() : "";
    return label || key;
  }

  /* The newest ground truths that finished, and whether a newer request is still waiting for a worker. */
  function drawTruths(truths) {
    var status = $("truths-status");
    if (!truths) return;
    var latest = truths.latest, shown = truths.shown;
    var parts = [];
    if (shown && shown.status === "done") {
      parts.push("Computed on " + count(shown.watermark, "label") + " at " + clock(shown.computed_at) + " in " + fmt(shown.duration_ms / 1000, 1) + " s.");
    } else if (shown) {
      parts.push("The last request failed: " + shown.error);
    }
    if (latest.status === "pending") parts.push("A request (" + latest.methods.map(methodName).join(", ") + ") is waiting for a Celery worker or being computed.");
    text(status, parts.join(" "));
    var rows = shown ? shown.rows : [];
    $("truths-table").hidden = !rows.length;
    if (!rows.length) return;
    var head = $("truths-head"), body = $("truths-body");
    head.textContent = ""; body.textContent = "";
    var hr = el("tr");
    ["method", "accuracy vs gold"].concat(rows.map(function (r) { return "differs from " + r.name; })).forEach(function (h) {
      var th = el("th", h); th.scope = "col"; hr.appendChild(th);
    });
    head.appendChild(hr);
    rows.forEach(function (r) {
      var tr = el("tr");
      tr.dataset.method = r.method;
      tr.appendChild(cell("", r.name));
      tr.appendChild(cell("accuracy vs gold", r.accuracy_gold === null ? "no gold" : fmt(r.accuracy_gold, 3) + " (N = " + r.n_gold + ")", "num"));
      rows.forEach(function (o) {
        var n = o.method === r.method ? null : (r.changes || {})[o.method];
        tr.appendChild(cell("differs from " + o.name, n === null || n === undefined ? "—" : count(n, "prompt"), "num"));
      });
      body.appendChild(tr);
    });
  }

  function drawPower(full) {
    var summary = full && full.accuracy_summary;
    if (summary && summary.min_scored_for_power !== undefined) text($("min-scored"), String(summary.min_scored_for_power));
  }

  /* Fig. 4 in two numbers: the pooled accuracy against the others and against gold, side by side. */
  function pooled(summary) {
    if (!summary || summary.pooled_accuracy === null || summary.pooled_accuracy === undefined) return "—";
    return fmt(summary.pooled_accuracy, 3) + " (N = " + summary.n_scored + ")";
  }
  function drawAccuracyPair(full) {
    text($("acc-others"), pooled(full && full.accuracy_summary));
    text($("acc-gold"), pooled(full && full.accuracy_gold_summary));
  }

  function drawQualityRule(quick) {
    var quality = quick && quick.worker_quality;
    if (!quality) return;
    if (quality.n_control_prompts) text($("min-controls"), String(quality.rule.min_controls));
    text($("campaign-median"), quality.campaign_median_seconds === null ? "—" : fmt(quality.campaign_median_seconds, 1) + " s");
  }

  /* Sections another script draws (the free-text one: dashboard_free_text.js, on free-text campaigns' pages):
     each registers a function that gets every feed render gets, and draws with the helpers above. Deferred
     scripts run in order, so they register before the first poll answers. */
  var sections = [];
  window.chorusDashboard = { root: root, sections: sections, helpers: { $: $, fmt: fmt, text: text, el: el, cell: cell, count: count } };

  function render(d) {
    state.numbers = d.numbers;
    drawFreshness(d);
    drawNumbers(d.quick);
    if (d.quick) drawHistory(d.history || []); else emptyState("chart-history", EMPTY.noLabels);
    if (!d.full) {
      FULL_CHARTS.forEach(function (id) { emptyState(id, d.status.labels ? EMPTY.noFull : EMPTY.noLabels); });
    }
    state.workers = (d.workers || []).map(function (w) {
      // Sorted by flags: a block weighs most, then straight-lining, control accuracy (what quality rules
      // measure) and a researcher's flag; an exclusion, too fast and outlier count too.
      w.flag_score = (w.flags || []).reduce(function (score, f) {
        return score + ({ straight_lining: 2, control_accuracy: 2, too_fast: 1, outlier: 1 }[f.kind] || 0);
      }, 0) + (w.blocked ? 4 : 0) + (w.flagged ? 2 : 0) + (w.excluded_now ? 1 : 0);
      return w;
    });
    drawWorkers();
    drawAmbiguous(d.ambiguous || []);
    drawFull(d.full);
    drawPower(d.full);
    drawAccuracyPair(d.full);
    drawTruths(d.ground_truths);
    drawQualityRule(d.quick);
    sections.forEach(function (draw) { draw(d); });
    root.dataset.watermark = d.quick ? String(d.quick.watermark) : "0";
  }

  /* The last feed as of now: its clock moved on by the time since it arrived (for the ages shown). */
  function aged(d) {
    var copy = {};
    for (var k in d) copy[k] = d[k];
    copy.now = new Date(new Date(d.now).getTime() + (Date.now() - state.receivedAt)).toISOString();
    return copy;
  }

  /* Rows rebuilt from the held ones and a patch: in the patch's order, each held row with the fields sent. */
  function patched(rows, patch) {
    var held = {};
    rows.forEach(function (r) { held[r[patch.key]] = r; });
    return patch.order.map(function (id) {
      var row = {}, base = held[id] || {}, fields = patch.rows[id] || {}, f;
      for (f in base) row[f] = base[f];
      for (f in fields) row[f] = fields[f];
      return row;
    });
  }

  /* A delta (audits/selectors/feed.py dashboard_delta) merged into the feed the page knows. */
  function merge(delta) {
    var feed = state.feed || {};
    for (var piece in delta.changed) feed[piece] = delta.changed[piece];
    var tail = delta.history_tail;
    if (tail) feed.history = (feed.history || []).slice(0, tail.keep).concat(tail.points);
    var patches = delta.row_patches || {};
    for (var name in patches) feed[name] = patched(feed[name] || [], patches[name]);
    feed.now = delta.now;
    state.feed = feed;
    state.since = delta.since;
    return feed;
  }

  function feedUrl() {
    return url + "?have_full=" + state.haveFull + "&since=" + encodeURIComponent(state.since);
  }

  /* The next poll in pollMs, unless the page is hidden (then the next "visible" polls). */
  function schedule() {
    window.clearTimeout(state.timer);
    state.timer = document.hidden ? null : window.setTimeout(poll, pollMs);
  }

  function poll() {
    state.timer = null;
    if (state.inFlight) return;
    state.inFlight = true;
    var headers = { Accept: "application/json" };
    if (state.etag) headers["If-None-Match"] = state.etag;
    fetch(feedUrl(), { credentials: "same-origin", cache: "no-store", headers: headers })
      .then(function (r) {
        if (r.status === 304) return null;
        if (r.status === 400) {  // a token the feed no longer reads (an update of Chorus): start afresh
          state.since = ""; state.etag = null; state.feed = null;
        }
        if (!r.ok) throw new Error("HTTP " + r.status);
        state.etag = r.headers.get("ETag");
        return r.json();
      })
      .then(function (delta) {
        if (delta) {
          var d = merge(delta);
          state.receivedAt = Date.now();
          render(d);
        } else if (state.feed) {
          state.unchanged += 1;
          drawFreshness(aged(state.feed));
        }
        root.dataset.unchanged = String(state.unchanged);
        root.dataset.error = "";
      })
      .catch(function (err) {
        root.dataset.error = String(err);
        text($("full-freshness"), "Could not reach Chorus (" + err.message + "); retrying…");
      })
      .then(function () { state.inFlight = false; schedule(); });
  }

  // Polling only while the page is seen: a hidden tab asks nothing; seen again, it asks at once.
  document.addEventListener("visibilitychange", function () {
    window.clearTimeout(state.timer);
    state.timer = null;
    if (!document.hidden) poll();
  });

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
