// Small progressive enhancements; every page works without this file.
//   data-autosubmit on a form control: submit its form when the value changes.
//   data-confirm="question" on a form: ask before submitting (e.g. revoking a token).
//   .secret: a "Copy" button next to a value shown once (e.g. a new API token).
//   data-swap-errors on an htmx element (or an ancestor): swap its 4xx answers too (htmx drops them by default), so
//   the server's message (a 400 or 422 fragment saying why) is shown where the result would be.
(() => {
  "use strict";

  function autosubmit(root) {
    root.querySelectorAll("[data-autosubmit]").forEach((el) => {
      if (el.dataset.wmBound) return;
      el.dataset.wmBound = "1";
      el.addEventListener("change", () => el.form && el.form.requestSubmit());
    });
  }

  function copyButtons(root) {
    if (!navigator.clipboard) return;
    root.querySelectorAll(".secret").forEach((el) => {
      if (el.dataset.wmBound) return;
      el.dataset.wmBound = "1";
      const button = document.createElement("button");
      button.type = "button";
      button.className = "btn";
      button.textContent = "Copy";
      button.addEventListener("click", () => {
        navigator.clipboard.writeText(el.textContent.trim()).then(() => {
          button.textContent = "Copied";
          setTimeout(() => (button.textContent = "Copy"), 2000);
        });
      });
      el.insertAdjacentElement("afterend", button);
    });
  }

  document.addEventListener("submit", (event) => {
    const question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });

  document.addEventListener("htmx:beforeSwap", (event) => {
    const status = event.detail.xhr.status;
    const elt = event.detail.requestConfig && event.detail.requestConfig.elt;
    if (status >= 400 && status < 500 && elt && elt.closest && elt.closest("[data-swap-errors]")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  function enhance(root) {
    autosubmit(root);
    copyButtons(root);
  }

  document.addEventListener("DOMContentLoaded", () => enhance(document));
  // htmx swaps new content in: enhance it too.
  document.addEventListener("htmx:load", (event) => enhance(event.target));
})();
