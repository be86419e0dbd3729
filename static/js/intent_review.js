// Intent review queue shortcuts (keys.js does the navigation): j/k move through the candidates, v valid, i invalid,
// m merge into … (focus the intent list; Enter there submits, Escape goes back to the row), ? help. Every shortcut
// presses a real button or focuses a real field, so the page works without this file.
(function () {
  "use strict";
  const keys = window.WaymarkKeys;
  if (!keys) return;

  const cursor = keys.rowCursor("[data-intent-row]");

  function selected() {
    return cursor.selected() || cursor.select(0);
  }

  function press(selector) {
    const row = selected();
    const button = row && row.querySelector(selector);
    if (button) button.click();
    return Boolean(button);
  }

  // The merge list is a field, so keys.js leaves its keys alone: Enter submits its form, Escape returns to the row.
  document.addEventListener("keydown", function (event) {
    const target = event.target;
    if (!(target && target.matches && target.matches("[data-merge-target]"))) return;
    if (event.key === "Enter") {
      event.preventDefault();
      if (target.value) target.form.requestSubmit();
    } else if (event.key === "Escape") {
      const row = target.closest("[data-intent-row]");
      if (row) row.focus();
    }
  });

  keys.helpButton("[data-intent-shortcuts-help]", "intent-review-shortcuts");
  keys.onKeys({
    "?": function () { return keys.toggleDialog("intent-review-shortcuts"); },
    j: function () { return Boolean(cursor.next()); },
    k: function () { return Boolean(cursor.previous()); },
    v: function () { return press("[data-valid]"); },
    i: function () { return press("[data-invalid]"); },
    m: function () {
      const row = selected();
      const list = row && row.querySelector("[data-merge-target]");
      if (!list) return false;
      list.focus();
      return true;
    },
  });
})();
