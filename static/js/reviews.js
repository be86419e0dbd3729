// The review pages' confirmations and keyboard shortcuts (keys.js does the navigation).
// On an item, every form marked data-confirm-dialog (approve, reject, override, withdraw) asks first: submitting it,
// by a click or by the a / r keys, opens the confirmation dialog (templates/reviews/confirm.html) with the evidence
// summed up and the form's text field copied in. Confirm submits the form with what was typed; Cancel or Escape
// closes it unsent and keeps the text in the form, so it is there when the dialog opens again. The queue's
// "Approve…" leads to the item at #approve, which opens the approval's confirmation there.
// On the queue j/k move, Enter/o open, ? help; a and r do nothing. Without this file the forms post as they are.
(function () {
  "use strict";
  const keys = window.WaymarkKeys;
  if (!keys) return;

  const queue = keys.rowCursor("[data-queue-row]", function (row) { return row.querySelector("[data-open]"); });

  function confirmDialog() {
    return document.getElementById("review-confirm");
  }

  function actionForm(action) {
    return document.querySelector('form[data-confirm-dialog="' + action + '"]');
  }

  function textField(form) {
    return form.querySelector("textarea");
  }

  function askToConfirm(action) {
    const dialog = confirmDialog();
    const form = actionForm(action);
    if (!dialog || !form) return false;
    dialog.dataset.action = action;
    dialog.querySelectorAll("[data-confirm-for]").forEach(function (el) {
      el.hidden = el.dataset.confirmFor !== action;
    });
    const field = textField(form);
    const comment = dialog.querySelector("[data-confirm-comment]");
    dialog.querySelector("[data-confirm-field]").hidden = !field;
    comment.value = field ? field.value : "";
    comment.required = Boolean(field && field.required);
    comment.disabled = !field;
    dialog.returnValue = "";
    dialog.showModal();
    (field ? comment : dialog.querySelector("[data-confirm-button]")).focus();
    return true;
  }

  function closed(dialog) {
    if (dialog.contains(document.activeElement)) document.activeElement.blur(); // shortcuts work again at once
    const form = actionForm(dialog.dataset.action);
    if (!form) return;
    const field = textField(form);
    if (field) field.value = dialog.querySelector("[data-confirm-comment]").value; // kept on Cancel and Escape too
    if (dialog.returnValue !== "confirm") return;
    form.dataset.confirmed = "1";
    form.requestSubmit();
  }

  // A submit not confirmed yet opens the dialog instead (the browser has checked the form's required fields).
  document.addEventListener("submit", function (event) {
    const form = event.target;
    const action = form.dataset && form.dataset.confirmDialog;
    if (!action || form.dataset.confirmed === "1") return;
    if (askToConfirm(action)) event.preventDefault();
  });

  // A deferred script runs once the document is parsed: set up at once rather than on DOMContentLoaded, which
  // waits for every other deferred script (Mermaid on a graph item), so a confirm clicked early is never lost.
  function setUp() {
    const dialog = confirmDialog();
    if (dialog) dialog.addEventListener("close", function () { closed(dialog); });
    if (window.location.hash === "#approve") {
      if (askToConfirm("approve")) history.replaceState(null, "", window.location.pathname + window.location.search);
    } else if (window.location.hash === "#reject") {
      const reason = document.querySelector("[data-reject-reason]");
      const folded = reason && reason.closest("details");
      if (folded) folded.open = true; // an admin's "Judge it instead"
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
