// Mermaid's configuration, loaded right after vendor/mermaid/mermaid.min.js (both deferred, so in order).
// securityLevel "strict": labels are text (HTML in them is encoded), no click handlers, no scripts in drawings;
// the graph pages also escape every label (graphs.core.serialize.to_mermaid) before it gets here.
(function () {
  "use strict";
  if (!window.mermaid) return;
  window.mermaid.initialize({
    startOnLoad: true,
    securityLevel: "strict",
    secure: ["secure", "securityLevel", "startOnLoad", "maxTextSize", "suppressErrorRendering", "maxEdges", "themeCSS"],
  });
})();
