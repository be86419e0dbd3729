// Charts drawn with the vendored Chart.js from a JSON island (Django's json_script) on the page:
//   <canvas data-chart="island-id"></canvas> {{ spec|json_script:"island-id" }}
// spec: {labels: [...], x_title, y_title, kind?: "line"|"bar", series: [{label, data: [number|null], points_only?,
// stepped?}]}.
// Every chart has its numbers in a table beside it, so the page says everything without this file.
(() => {
  "use strict";

  const COLOURS = ["#4f46e5", "#166534", "#b45309", "#b42318", "#0b5cad"];

  function dataset(series, index) {
    const colour = COLOURS[index % COLOURS.length];
    return {
      label: series.label,
      data: series.data,
      borderColor: colour,
      backgroundColor: colour,
      showLine: !series.points_only,
      stepped: series.stepped ? "before" : false,
      spanGaps: false,
      pointRadius: series.points_only ? 5 : 3,
      pointStyle: ["circle", "rect", "triangle", "rectRot", "star"][index % 5],
    };
  }

  function draw(canvas) {
    const island = document.getElementById(canvas.dataset.chart);
    if (!island || window.Chart === undefined || window.Chart.getChart(canvas)) return;
    const spec = JSON.parse(island.textContent);
    const axis = (title) => ({ title: { display: Boolean(title), text: title || "" } });
    new window.Chart(canvas, {
      type: spec.kind === "bar" ? "bar" : "line",
      data: { labels: spec.labels, datasets: spec.series.map(dataset) },
      options: {
        animation: false,
        maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        scales: {
          x: axis(spec.x_title),
          y: { ...axis(spec.y_title), suggestedMin: 0, suggestedMax: 1 },
        },
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
