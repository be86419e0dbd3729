// Charts drawn with the vendored Chart.js from a JSON island (Django's json_script) on the page:
//   <canvas data-chart="island-id"></canvas> {{ spec|json_script:"island-id" }}
// Pages load it with {% include "_chart_scripts.html" %} in their head block; specs are built by
// common/charts.py (chart_spec).
// spec: {labels: [...], x_title, y_title, kind?: "line"|"bar", stacked?: bool,
//        y_range?: [min|null, max|null] (suggested; default [0, 1]; null: the data decides), y_integer?: bool,
//        y2_title?, y2_range?, y2_integer? (a second axis on the right, for series with axis "y2"),
//        series: [{label, data: [number|null], kind?: "line"|"bar" (default: the chart's), axis?: "y"|"y2",
//                  tone?: "success"|"failure"|"neutral", points_only?, stepped?}]}.
// Every chart has its numbers in a table beside it, so the page says everything without this file.
(() => {
  "use strict";

  const COLOURS = ["#4f46e5", "#166534", "#b45309", "#b42318", "#0b5cad"];
  const TONES = { success: "#166534", failure: "#b42318", neutral: "#6b7280" };
  const POINTS = ["circle", "rect", "triangle", "rectRot", "star"];

  function dataset(spec, series, index) {
    const colour = TONES[series.tone] || COLOURS[index % COLOURS.length];
    const kind = series.kind || spec.kind || "line";
    const common = {
      label: series.label,
      data: series.data,
      type: kind,
      yAxisID: series.axis === "y2" ? "y2" : "y",
      borderColor: colour,
      backgroundColor: colour,
      // Lines are drawn over bars (a lower order is drawn later).
      order: kind === "line" ? 0 : 1,
    };
    if (kind === "bar") return common;
    return {
      ...common,
      showLine: !series.points_only,
      stepped: series.stepped ? "before" : false,
      spanGaps: false,
      pointRadius: series.points_only ? 5 : 3,
      pointStyle: POINTS[index % POINTS.length],
    };
  }

  function range(values, fallback) {
    const [min, max] = Array.isArray(values) ? values : fallback;
    const options = {};
    if (min !== null && min !== undefined) options.suggestedMin = min;
    if (max !== null && max !== undefined) options.suggestedMax = max;
    return options;
  }

  // Every label keeps its slot on the x axis (30 days are 30 slots, days without runs included); the names are
  // written from the last slot back, as many as fit, so the newest (today) is always named. Chart.js's own skipping
  // counts from the first and may leave the newest unnamed.
  const LABEL_SPACE = 36; // px a name needs along the axis, slanted

  function xTicks(count) {
    return {
      autoSkip: false,
      maxRotation: 50,
      callback(value, index) {
        const step = Math.max(1, Math.ceil((count * LABEL_SPACE) / Math.max(1, this.chart.width)));
        return (count - 1 - index) % step === 0 ? this.getLabelForValue(value) : "";
      },
    };
  }

  function scales(spec) {
    const axis = (title) => ({ title: { display: Boolean(title), text: title || "" } });
    const stacked = Boolean(spec.stacked);
    const y = { ...axis(spec.y_title), ...range(spec.y_range, [0, 1]), stacked };
    if (spec.y_integer) y.ticks = { precision: 0 };
    const result = { x: { ...axis(spec.x_title), stacked, ticks: xTicks(spec.labels.length) }, y };
    if (spec.series.some((series) => series.axis === "y2")) {
      result.y2 = {
        ...axis(spec.y2_title),
        ...range(spec.y2_range, [0, null]),
        position: "right",
        grid: { drawOnChartArea: false },
      };
      if (spec.y2_integer) result.y2.ticks = { precision: 0 };
    }
    return result;
  }

  function draw(canvas) {
    const island = document.getElementById(canvas.dataset.chart);
    if (!island || window.Chart === undefined || window.Chart.getChart(canvas)) return;
    const spec = JSON.parse(island.textContent);
    new window.Chart(canvas, {
      type: spec.kind === "bar" ? "bar" : "line",
      data: { labels: spec.labels, datasets: spec.series.map((series, index) => dataset(spec, series, index)) },
      options: {
        animation: false,
        maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        scales: scales(spec),
        plugins: { legend: { position: "bottom" } },
      },
    });
  }

  function drawAll(root) {
    root.querySelectorAll("canvas[data-chart]").forEach(draw);
  }

  function destroyAll(root) {
    if (window.Chart === undefined) return;
    root.querySelectorAll("canvas[data-chart]").forEach((canvas) => {
      const chart = window.Chart.getChart(canvas);
      if (chart) chart.destroy();
    });
  }

  document.addEventListener("DOMContentLoaded", () => drawAll(document));
  // A polled fragment is swapped in: free the old charts, draw the new ones.
  document.addEventListener("htmx:beforeSwap", (event) => destroyAll(event.detail.target));
  document.addEventListener("htmx:load", (event) => drawAll(event.target));
})();
