// Intent review queue shortcuts: j/k move through the candidates, v valid, i invalid, m merge into … (focus the
// intent list; Enter there submits), ? help. Every shortcut presses a real button or focuses a real field, so the
// page works without this file.
(function () {
  "use strict";

  function typing(target) {
    const tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }

  function rows() {
    return Array.from(document.querySelectorAll("[data-intent-row]"));
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
    all[current].focus({ preventScroll: false });
  }

  function selected() {
    const all = rows();
    if (current < 0 && all.length) select(0);
    return current >= 0 && current < all.length ? all[current] : null;
  }

  function toggleHelp() {
    const dialog = document.getElementById("intent-review-shortcuts");
    if (!dialog) return;
    if (dialog.open) dialog.close();
    else dialog.showModal();
  }

  function press(selector) {
    const row = selected();
    const button = row && row.querySelector(selector);
    if (button) button.click();
    return Boolean(button);
  }

  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-intent-shortcuts-help]")) toggleHelp();
  });

  document.addEventListener("keydown", function (event) {
    const target = event.target;
    // Enter on the merge list submits its form (a select does not submit by itself).
    if (event.key === "Enter" && target && target.matches && target.matches("[data-merge-target]")) {
      event.preventDefault();
      if (target.value) target.form.requestSubmit();
      return;
    }
    if (event.key === "Escape" && target && target.matches && target.matches("[data-merge-target]")) {
      const row = target.closest("[data-intent-row]");
      if (row) row.focus();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(target)) return;
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
    } else if (key === "v") {
      if (press("[data-valid]")) event.preventDefault();
    } else if (key === "i") {
      if (press("[data-invalid]")) event.preventDefault();
    } else if (key === "m") {
      const row = selected();
      const list = row && row.querySelector("[data-merge-target]");
      if (list) {
        event.preventDefault();
        list.focus();
      }
    }
  });
})();
