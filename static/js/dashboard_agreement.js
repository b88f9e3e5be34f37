/* α and AC1 over time on the dashboard's history chart, beside the six numbers: the feed's
   agreement_history, one point per full audit (their cadence, not the quick runs'), drawn dashed on the
   chart's own axes (labels audited; both coefficients lie in [−1, 1] like the SDs' scale). Included after
   dashboard.js on the dashboards of campaigns with a label matrix; it draws on each feed through the
   section hook dashboard.js offers (window.chorusDashboard), after dashboard.js has drawn the six lines. */
(function () {
  "use strict";

  var dashboard = window.chorusDashboard;
  if (!dashboard || typeof Chart === "undefined") return;
  var SERIES = [
    { key: "alpha", color: "#16a085" },
    { key: "ac1", color: "#d4ac0d" }
  ];

  dashboard.sections.push(function (d) {
    var chart = Chart.getChart("chart-history");
    var points = d.agreement_history || [];
    if (!chart || !points.length) return;
    var level = points[points.length - 1].alpha_level;
    chart.data.datasets = chart.data.datasets.filter(function (s) { return !s.agreement; });
    SERIES.forEach(function (s) {
      chart.data.datasets.push({
        agreement: true,
        label: s.key === "alpha" ? "α (" + level + ")" : "AC1",
        borderColor: s.color, backgroundColor: s.color, borderDash: [6, 4], borderWidth: 2,
        pointRadius: 3, spanGaps: true,
        data: points.map(function (p) { return { x: p.watermark, y: p[s.key] }; })
      });
    });
    chart.options.scales.y.title.text = "noise: SD (residual: a variance, may be < 0); α, AC1 (full audits)";
    chart.update("none");
  });
})();
