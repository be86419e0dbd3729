// Shared keyboard navigation of the review pages (reviews.js, intent_review.js): a cursor over rows moved with j/k,
// dialogs toggled with ?, and one keydown listener that ignores keys typed into fields or pressed with a modifier.
// Load it before the page's own script (both deferred, so in document order). Exposes window.WaymarkKeys.
(function () {
  "use strict";

  // A field inside a closed dialog is not being typed into: Chrome may leave the focus there after Escape.
  function typing(target) {
    const tag = target && target.tagName;
    const field = tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || Boolean(target && target.isContentEditable);
    return field && !(target.closest && target.closest("dialog:not([open])"));
  }

  // A cursor over the elements matching `selector` (read again at each move: htmx may swap the rows).
  // `focusOf(row)` names what gets the focus when a row is selected (default: the row itself).
  function rowCursor(selector, focusOf) {
    let current = -1;
    function rows() {
      return Array.from(document.querySelectorAll(selector));
    }
    function select(index) {
      const all = rows();
      if (!all.length) return null;
      current = Math.max(0, Math.min(index, all.length - 1));
      all.forEach(function (row, i) {
        row.classList.toggle("selected", i === current);
        row.setAttribute("aria-selected", i === current ? "true" : "false");
        row.style.outline = i === current ? "2px solid #2563eb" : "";
      });
      const target = focusOf ? focusOf(all[current]) : all[current];
      if (target) target.focus({ preventScroll: false });
      return all[current];
    }
    return {
      rows: rows,
      select: select,
      next: function () { return select(current + 1); },
      previous: function () { return select(current < 0 ? 0 : current - 1); },
      selected: function () {
        const all = rows();
        return current >= 0 && current < all.length ? all[current] : null;
      },
      // Start before `index`, so that the first j selects it.
      startAt: function (index) { current = index - 1; },
    };
  }

  function toggleDialog(id) {
    const dialog = document.getElementById(id);
    if (!dialog) return false;
    if (dialog.open) dialog.close();
    else dialog.showModal();
    return true;
  }

  // `bindings` maps a key ("j", "?", "Enter") to a function(event) that returns true when it acted; then the key's
  // default is prevented. Keys typed into a field, pressed with Ctrl/Meta/Alt or while a dialog is open are ignored
  // (a dialog handles its own keys: Escape closes it).
  function onKeys(bindings) {
    document.addEventListener("keydown", function (event) {
      if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
      if (document.querySelector("dialog[open]") && event.key !== "?") return;
      const action = bindings[event.key];
      if (action && action(event)) event.preventDefault();
    });
  }

  // Clicking an element matching `selector` toggles the dialog `id` (the visible "Shortcuts (?)" buttons).
  function helpButton(selector, id) {
    document.addEventListener("click", function (event) {
      if (event.target.closest && event.target.closest(selector)) toggleDialog(id);
    });
  }

  window.WaymarkKeys = {
    typing: typing,
    rowCursor: rowCursor,
    toggleDialog: toggleDialog,
    onKeys: onKeys,
    helpButton: helpButton,
  };
})();
