// Mermaid's configuration, loaded after vendor/mermaid/mermaid.min.js (and graph_view.js; all deferred, so in order).
// securityLevel "strict": labels are text (HTML in them is encoded), no click handlers, no scripts in drawings;
// the graph pages also escape every label (graphs.core.serialize.to_mermaid) before it gets here.
// It draws every pre.mermaid at once (not on window load), then tells graph_view.js with a "waymark:drawn" event.
(function () {
  "use strict";
  if (!window.mermaid) return;
  window.mermaid.initialize({
    startOnLoad: false,
    securityLevel: "strict",
    secure: ["secure", "securityLevel", "startOnLoad", "maxTextSize", "suppressErrorRendering", "maxEdges", "themeCSS"],
  });
  function drawn() {
    document.dispatchEvent(new CustomEvent("waymark:drawn"));
  }
  window.mermaid.run({ querySelector: "pre.mermaid" }).then(drawn, drawn);
})();
