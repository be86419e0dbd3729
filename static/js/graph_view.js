// Graph drawings (templates/graphs/_drawing.html). Once Mermaid has drawn a figure's SVG (mermaid_init.js sends
// "waymark:drawn"), the drawing is fitted whole into its box: the panel's width and at most FIT_HEIGHT of the window's
// height, never larger than Mermaid drew it. Then the vendored Panzoom (vendor/panzoom) zooms and pans it inside
// the box, which clips it, so the caption below is never covered: the + / − / Fit buttons, a drag, Ctrl + wheel, and
// on the focused drawing + − 0 and the arrow keys. Fit (and a resized window) draws it whole again.
(function () {
  "use strict";
  const FIT_HEIGHT = 0.7; // of the window's height
  const MIN_HEIGHT = 256; // px: a box never smaller than this on a short window
  const STEP = 48; // px per arrow key
  const INSTANT = { animate: false };

  function naturalSize(svg) {
    const box = svg.viewBox && svg.viewBox.baseVal;
    if (box && box.width && box.height) return { width: box.width, height: box.height };
    const rect = svg.getBoundingClientRect();
    return { width: rect.width, height: rect.height };
  }

  // The scale at which the whole drawing fits the canvas's width and the height limit (at most 1: never enlarged).
  function fittedScale(canvas, size) {
    const width = canvas.clientWidth;
    const height = Math.max(MIN_HEIGHT, window.innerHeight * FIT_HEIGHT);
    return Math.min(1, width / size.width, height / size.height);
  }

  function fit(view) {
    const size = naturalSize(view.svg);
    const scale = fittedScale(view.canvas, size);
    if (!(scale > 0)) return; // hidden (no width yet): fitted on the next resize
    view.svg.style.maxWidth = "none";
    view.svg.setAttribute("width", String(size.width * scale));
    view.svg.setAttribute("height", String(size.height * scale));
    view.canvas.style.height = size.height * scale + "px";
    view.panzoom.setOptions({ maxScale: Math.max(4, 3 / scale) }); // zoom in to three times Mermaid's own size
    view.panzoom.reset(INSTANT);
  }

  function keyDown(view, event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const pan = { ArrowLeft: [STEP, 0], ArrowRight: [-STEP, 0], ArrowUp: [0, STEP], ArrowDown: [0, -STEP] }[event.key];
    if (pan) {
      const scale = view.panzoom.getScale();
      view.panzoom.pan(pan[0] / scale, pan[1] / scale, { relative: true, animate: false });
    } else if (event.key === "+" || event.key === "=") {
      view.panzoom.zoomIn(INSTANT);
    } else if (event.key === "-") {
      view.panzoom.zoomOut(INSTANT);
    } else if (event.key === "0") {
      fit(view);
    } else {
      return;
    }
    event.preventDefault();
  }

  function setUp(figure) {
    const canvas = figure.querySelector("[data-graph-canvas]");
    const svg = canvas && canvas.querySelector("svg");
    if (!svg || figure.dataset.graphReady || !window.Panzoom) return;
    figure.dataset.graphReady = "1";
    const view = {
      canvas: canvas,
      svg: svg,
      panzoom: window.Panzoom(svg, {
        canvas: true, // a drag anywhere in the box pans
        minScale: 1,
        maxScale: 4,
        step: 0.4,
        cursor: "grab",
        handleStartEvent: function (event) {
          event.preventDefault();
          canvas.focus({ preventScroll: true });
        },
      }),
    };
    fit(view);
    canvas.addEventListener("wheel", function (event) {
      if (event.ctrlKey || event.metaKey) view.panzoom.zoomWithWheel(event);
    });
    canvas.addEventListener("keydown", function (event) { keyDown(view, event); });
    figure.querySelectorAll("[data-graph-zoom]").forEach(function (button) {
      button.addEventListener("click", function () {
        const action = button.dataset.graphZoom;
        if (action === "in") view.panzoom.zoomIn(INSTANT);
        else if (action === "out") view.panzoom.zoomOut(INSTANT);
        else fit(view);
      });
    });
    const tools = figure.querySelector("[data-graph-tools]");
    if (tools) tools.hidden = false;
    let pending = 0;
    window.addEventListener("resize", function () {
      window.clearTimeout(pending);
      pending = window.setTimeout(function () { fit(view); }, 150);
    });
  }

  function setUpAll() {
    document.querySelectorAll("[data-graph-view]").forEach(setUp);
  }

  document.addEventListener("waymark:drawn", setUpAll);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUpAll);
  else setUpAll();
})();
