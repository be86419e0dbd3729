// Small progressive enhancements; every page works without this file.
//   data-autosubmit on a form control: submit its form when the value changes.
//   data-confirm="question" on a form: ask before submitting (e.g. revoking a token).
//   .secret: a "Copy" button next to a value shown once (e.g. a new API token).
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

  function enhance(root) {
    autosubmit(root);
    copyButtons(root);
  }

  document.addEventListener("DOMContentLoaded", () => enhance(document));
  // htmx swaps new content in: enhance it too.
  document.addEventListener("htmx:load", (event) => enhance(event.target));
})();
