// The trace explorer (templates/trajectories/list.html); the page works without this file.
//   The address is the state: filtering pushes its query to the bar (htmx's hx-push-url). When Back or Forward
//   brings an earlier address (htmx restores its copy of the page, or asks the server for it), the filter and sort
//   fields are filled from that address again, so the controls always say what the results show.
//   The column chooser: a box hides or shows its column at once (a class on the table); htmx sends the choice to
//   the server, which keeps it for the user (trajectories/explorer_columns.py). Without this file the chooser's
//   button sends the same form.
(() => {
  "use strict";

  const FILTERS = "form.explorer-filters";
  const CHOOSER = ".column-chooser form";
  let shown = null; // column key -> shown, as last chosen on this page

  function fillFromAddress() {
    const form = document.querySelector(FILTERS);
    if (!form) return;
    const query = new URLSearchParams(window.location.search);
    for (const field of form.elements) {
      if (!field.name) continue;
      const value = query.get(field.name) || "";
      if (field.tagName === "SELECT") {
        field.value = value;
        if (field.selectedIndex < 0) field.selectedIndex = 0; // not among the options: the default, as the server
      } else if (field.type !== "submit" && field.type !== "button") {
        field.value = value;
      }
    }
    const more = form.querySelector("details.more-filters");
    if (more) more.open = Array.from(more.querySelectorAll("input")).some((input) => input.value !== "");
  }

  function readChoice() {
    const chooser = document.querySelector(CHOOSER);
    if (!chooser) return;
    shown = new Map();
    chooser.querySelectorAll("input[name=column]").forEach((box) => shown.set(box.value, box.checked));
  }

  function applyChoice() {
    if (!shown) return;
    document.querySelectorAll("table.runs").forEach((table) => {
      shown.forEach((visible, key) => table.classList.toggle(`hide-${key}`, !visible));
    });
    document.querySelectorAll(`${CHOOSER} input[name=column]`).forEach((box) => {
      box.checked = shown.get(box.value) !== false;
      box.toggleAttribute("checked", box.checked); // htmx's copy of the page for Back keeps attributes only
    });
  }

  function keepNextInStep() {
    const next = document.querySelector(`${CHOOSER} input[name=next]`);
    if (next) next.value = window.location.pathname + window.location.search;
  }

  document.addEventListener("change", (event) => {
    const box = event.target;
    if (!box.matches || !box.matches(`${CHOOSER} input[name=column]`)) return;
    if (!shown) readChoice();
    shown.set(box.value, box.checked);
    applyChoice();
  });

  document.addEventListener("DOMContentLoaded", () => {
    readChoice();
    const chooser = document.querySelector(CHOOSER);
    if (chooser && window.htmx) chooser.classList.add("saves-on-change"); // its button is not needed then
  });
  // New rows: the columns as chosen here (a choice still on its way to the server is not in them yet).
  document.addEventListener("htmx:afterSwap", applyChoice);
  document.addEventListener("htmx:pushedIntoHistory", keepNextInStep);
  document.addEventListener("htmx:historyRestore", () => {
    fillFromAddress();
    applyChoice();
    keepNextInStep();
  });
  // A page the browser brings back whole (its cache, or a reload) may carry field values typed before.
  window.addEventListener("pageshow", fillFromAddress);
})();
