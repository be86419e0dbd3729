// Review keyboard shortcuts: j/k move through the queue, Enter/o open, a approve, r reject (go to the reason), ? help.
// Every shortcut clicks or focuses a real link, button or field on the page, so the pages work without this file.
(function () {
  "use strict";

  function typing(target) {
    const tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }

  function rows() {
    return Array.from(document.querySelectorAll("[data-queue-row]"));
  }

  let current = -1;

  function select(index) {
    const all = rows();
    if (!all.length) return;
    current = Math.max(0, Math.min(index, all.length - 1));
    all.forEach(function (row, i) {
      row.classList.toggle("selected", i === current);
      row.setAttribute("aria-selected", i === current ? "true" : "false");
      row.style.outline = i === current ? "2px solid #2563eb" : "";
    });
    const link = all[current].querySelector("[data-open]");
    if (link) link.focus({ preventScroll: false });
  }

  function selected() {
    const all = rows();
    return current >= 0 && current < all.length ? all[current] : null;
  }

  function scope() {
    return selected() || document;
  }

  function toggleHelp() {
    const dialog = document.getElementById("review-shortcuts");
    if (!dialog) return;
    if (dialog.open) dialog.close();
    else dialog.showModal();
  }

  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-shortcuts-help]")) toggleHelp();
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    const key = event.key;
    if (key === "?") {
      event.preventDefault();
      toggleHelp();
    } else if (key === "j") {
      event.preventDefault();
      select(current + 1);
    } else if (key === "k") {
      event.preventDefault();
      select(current < 0 ? 0 : current - 1);
    } else if ((key === "o" || key === "Enter") && selected()) {
      const link = selected().querySelector("[data-open]");
      if (link) {
        event.preventDefault();
        link.click();
      }
    } else if (key === "a") {
      const button = scope().querySelector("[data-approve]");
      if (button) {
        event.preventDefault();
        button.click();
      }
    } else if (key === "r") {
      const reason = document.querySelector("[data-reject-reason]");
      const link = scope().querySelector("[data-reject]");
      if (!selected() && reason) {
        event.preventDefault();
        reason.focus();
      } else if (link) {
        event.preventDefault();
        link.click();
      }
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (window.location.hash === "#reject") {
      const reason = document.querySelector("[data-reject-reason]");
      if (reason) reason.focus();
    }
    const all = rows();
    const firstPending = all.findIndex(function (row) { return row.dataset.pending === "1"; });
    if (firstPending >= 0) current = firstPending - 1;
  });
})();
