// Intent review queue shortcuts (templates/intents/taxonomy/queue.html; keys.js reads the keyboard): j / s next
// candidate (skip), k previous, v valid, i invalid, m merge into … (focus the intent list; Enter there merges,
// Escape goes back), ? help. Every shortcut presses a real link or button or focuses a real field, so the page
// works without this file. After a judgment or a move, htmx swaps the review part in and the candidate shown gets
// the focus, so the next key acts on it (auto-advance).
(function () {
  "use strict";
  const keys = window.WaymarkKeys;
  if (!keys) return;

  function focused() {
    return document.getElementById("intent-focus");
  }

  function press(selector) {
    const panel = focused();
    const control = panel && panel.querySelector(selector);
    if (control) control.click();
    return Boolean(control);
  }

  function focusPanel() {
    const panel = focused();
    if (panel) panel.focus({ preventScroll: false });
  }

  // The merge list is a field, so keys.js leaves its keys alone: Enter merges, Escape returns to the candidate.
  document.addEventListener("keydown", function (event) {
    const target = event.target;
    if (!(target && target.matches && target.matches("[data-merge-target]"))) return;
    if (event.key === "Enter") {
      event.preventDefault();
      if (target.value) press("[data-merge]");
    } else if (event.key === "Escape") {
      focusPanel();
    }
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.target && event.target.id === "intent-review") focusPanel();
  });
  document.addEventListener("DOMContentLoaded", function () {
    if (new URLSearchParams(window.location.search).has("candidate")) focusPanel();
  });

  keys.helpButton("[data-intent-shortcuts-help]", "intent-review-shortcuts");
  keys.onKeys({
    "?": function () { return keys.toggleDialog("intent-review-shortcuts"); },
    j: function () { return press("[data-skip]"); },
    s: function () { return press("[data-skip]"); },
    k: function () { return press("[data-previous]"); },
    v: function () { return press("[data-valid]"); },
    i: function () { return press("[data-invalid]"); },
    m: function () {
      const panel = focused();
      const list = panel && panel.querySelector("[data-merge-target]");
      if (!list) return false;
      list.focus();
      return true;
    },
  });
})();
