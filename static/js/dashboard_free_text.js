/* The audit dashboard's free-text section: a free-text campaign's answer noise (the feed's free_text), its
   distributions, most divided prompts (linked to their workspace), ProtoQA's filter failures and how far
   the clustering has come. Included after dashboard.js on free-text campaigns' dashboards only; it draws
   on each feed through the section hook dashboard.js offers (window.chorusDashboard). */
(function () {
  "use strict";

  var dashboard = window.chorusDashboard;
  if (!dashboard) return;
  var root = dashboard.root, h = dashboard.helpers;
  var $ = h.$, fmt = h.fmt, text = h.text, el = h.el, cell = h.cell, count = h.count;

  var FREE_TEXT_ROWS = [
    ["n_clusters", "clusters", 2], ["top_share", "top-cluster share", 3],
    ["entropy_bits", "entropy (bits)", 3], ["invalid_share", "invalid share", 3]
  ];
  function workspaceLink(id) {
    var a = el("a", id);
    a.href = root.dataset.workspaceUrl.replace("PROMPT-ID", encodeURIComponent(id));
    return a;
  }
  function promptList(node, items, empty, fill) {
    node.textContent = "";
    if (!items.length) { node.appendChild(el("li", empty, "muted")); return; }
    items.forEach(function (item) { var li = el("li"); fill(li, item); node.appendChild(li); });
  }
  function drawFreeText(ft) {
    if (!ft || !$("free-text")) return;
    var clustered = ft.clustering_protocol === "single"
      ? ft.n_final + " clustered by a researcher (final: single annotator, no agreement measured)."
      : ft.n_clustered + " clustered by two researchers, " + ft.n_adjudicated + " adjudicated.";
    text($("free-text-progress"), count(ft.n_answers, "answer") + " on " + ft.n_answered + " of " + count(ft.n_prompts, "prompt") + " · " +
      ft.n_proposed + " proposed, " + clustered);
    text($("free-text-agreement"), ft.mean_blanc === null ? "" : "Agreement of the independent clusterings, mean over prompts: BLANC " +
      fmt(ft.mean_blanc, 3) + ", adjusted Rand " + fmt(ft.mean_adjusted_rand, 3) + ".");
    var body = $("free-text-body");
    if (ft.distribution) {
      body.textContent = "";
      FREE_TEXT_ROWS.forEach(function (r) {
        var x = ft.distribution[r[0]], tr = el("tr");
        tr.dataset.key = r[0];
        tr.appendChild(el("th", r[1]));
        tr.lastChild.scope = "row";
        tr.appendChild(cell("prompts", String(x.n)));
        tr.appendChild(cell("mean", fmt(x.mean, r[2])));
        tr.appendChild(cell("median", fmt(x.median, r[2])));
        tr.appendChild(cell("quartiles", fmt(x.q1, r[2]) + "–" + fmt(x.q3, r[2])));
        body.appendChild(tr);
      });
    }
    promptList($("free-text-divided"), ft.most_divided, "None yet.", function (li, p) {
      li.appendChild(workspaceLink(p.id));
      li.appendChild(document.createTextNode(": entropy " + fmt(p.entropy_bits, 3) + " bits, top cluster " + fmt(p.top_share * 100, 0) + " %"));
    });
    promptList($("free-text-failing"), ft.failing_filter, "None.", function (li, id) { li.appendChild(workspaceLink(id)); });
  }

  dashboard.sections.push(function (d) { drawFreeText(d.free_text); });
})();
