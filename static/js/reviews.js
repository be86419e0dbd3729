// Review keyboard shortcuts (keys.js does the navigation): on the queue j/k move, Enter/o open, ? help; a and r do
// nothing there. On an opened item, a (approve) and r (reject) open a confirmation dialog with the verdict and a
// comment; its confirm button submits the page's own approve or reject form, Escape or Cancel closes it unsent.
// Every shortcut ends in a real link, button or form on the page, so the pages work without this file.
(function () {
  "use strict";
  const keys = window.WaymarkKeys;
  if (!keys) return;

  const queue = keys.rowCursor("[data-queue-row]", function (row) { return row.querySelector("[data-open]"); });

  // The confirmation dialog exists only on an item the user may judge (templates/reviews/shortcuts.html).
  function confirmDialog() {
    return document.getElementById("review-confirm");
  }

  function pageForm(verdict) {
    const field = document.querySelector(verdict === "approve" ? "[data-approve]" : "[data-reject-reason]");
    return field ? field.form : null;
  }

  function askToConfirm(verdict) {
    const dialog = confirmDialog();
    const form = pageForm(verdict);
    if (!dialog || !form) return false;
    dialog.dataset.verdict = verdict;
    dialog.querySelectorAll("[data-confirm-verdict]").forEach(function (el) {
      el.hidden = el.dataset.confirmVerdict !== verdict;
    });
    const comment = dialog.querySelector("[data-confirm-comment]");
    const pageComment = form.querySelector("textarea[name=comment]");
    comment.value = pageComment ? pageComment.value : "";
    comment.required = verdict === "reject";
    dialog.returnValue = "";
    dialog.showModal();
    comment.focus();
    return true;
  }

  // A deferred script runs once the document is parsed: set up at once rather than on DOMContentLoaded, which
  // waits for every other deferred script (Mermaid on a graph item), so a confirm clicked early is never lost.
  function setUp() {
    const dialog = confirmDialog();
    if (dialog) {
      dialog.addEventListener("close", function () {
        if (dialog.contains(document.activeElement)) document.activeElement.blur();  // shortcuts work again at once
        if (dialog.returnValue !== "confirm") return;
        const form = pageForm(dialog.dataset.verdict);
        if (!form) return;
        const pageComment = form.querySelector("textarea[name=comment]");
        if (pageComment) pageComment.value = dialog.querySelector("[data-confirm-comment]").value;
        form.requestSubmit();
      });
    }
    if (window.location.hash === "#reject") {
      const reason = document.querySelector("[data-reject-reason]");
      if (reason) reason.focus();
    }
    const firstPending = queue.rows().findIndex(function (row) { return row.dataset.pending === "1"; });
    if (firstPending >= 0) queue.startAt(firstPending);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();

  keys.helpButton("[data-shortcuts-help]", "review-shortcuts");
  keys.onKeys({
    "?": function () { return keys.toggleDialog("review-shortcuts"); },
    j: function () { return Boolean(queue.next()); },
    k: function () { return Boolean(queue.previous()); },
    o: openSelected,
    Enter: openSelected,
    a: function () { return askToConfirm("approve"); },
    r: function () { return askToConfirm("reject"); },
  });

  function openSelected() {
    const row = queue.selected();
    const link = row && row.querySelector("[data-open]");
    if (!link) return false;
    link.click();
    return true;
  }
})();
