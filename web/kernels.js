// Every definition of the dataset with its workloads, solutions and traces: op-type tabs, a
// model / tp / ep tag filter, a name filter, and columns sorted by a click on their heading.
"use strict";

const { el } = Fib;

// The serving tags a kernels list filters on, in the order shown.
const servingTags = ["model", "tp", "ep"];

const tagsOf = (d) => (d.tags || []).filter((t) => servingTags.some((k) => t.startsWith(`${k}:`)));

// Columns: [heading, cell, kind, sort key].
const columns = [
  [
    "Definition",
    (d) => (d.has_definition ? Fib.kernelLink(d.name) : el("span", {}, d.name, el("span", { class: "muted" }, " (no definition file)"))),
    null,
    (d) => d.name,
  ],
  ["Op type", (d) => (d.op_type ? el("span", { class: "badge muted" }, d.op_type) : "–"), null, (d) => d.op_type || ""],
  ["Tags", (d) => tagsOf(d).map((t) => el("span", { class: "chip tag" }, t)), null, (d) => tagsOf(d).join(" ")],
  ["Workloads", (d) => d.workloads, "num", (d) => d.workloads],
  ["Solutions", (d) => d.solutions, "num", (d) => d.solutions],
  ["Traces", (d) => d.traces.total, "num", (d) => d.traces.total],
  ["Passed", (d) => d.traces.passed, "num", (d) => d.traces.passed],
  ["Failed", (d) => d.traces.failed, "num", (d) => d.traces.failed],
  [
    "Basis",
    (d) => (d.basis === "baseline" ? d.baseline_solutions.join(", ") : el("span", { class: "muted" }, "reference")),
    null,
    (d) => d.basis,
  ],
];

// A table whose headings sort it (a second click reverses).
function sortableTable(rows, sort, onSort) {
  const key = columns[sort.column][3];
  const sorted = [...rows].sort((a, b) => {
    const x = key(a);
    const y = key(b);
    const order = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
    return sort.descending ? -order : order;
  });
  const wrap = Fib.table(
    columns.map(([title, cell, kind]) => [title, cell, kind]),
    sorted,
    { id: "kernels-table" },
  );
  wrap.querySelectorAll("th").forEach((th, i) => {
    th.classList.add("sortable");
    th.dataset.column = columns[i][0];
    if (i === sort.column) th.dataset.sorted = sort.descending ? "descending" : "ascending";
    th.addEventListener("click", () => onSort(i));
  });
  return wrap;
}

Fib.run("kernels.html", async (content) => {
  const data = await Fib.api("/api/leaderboard");
  const defs = data.summary.definitions;
  const state = { opType: "", tag: "", query: "", sort: { column: 0, descending: false } };
  const tableBox = el("div", {});
  const redraw = () => {
    const q = state.query;
    const shown = defs.filter(
      (d) =>
        (!state.opType || d.op_type === state.opType) &&
        (!state.tag || tagsOf(d).includes(state.tag)) &&
        (!q || d.name.toLowerCase().includes(q) || (d.op_type || "").toLowerCase().includes(q)),
    );
    tableBox.replaceChildren(
      el("p", { class: "muted small", id: "kernels-count" }, `${shown.length} of ${defs.length} definitions`),
      sortableTable(shown, state.sort, (column) => {
        state.sort = { column, descending: state.sort.column === column ? !state.sort.descending : columns[column][2] === "num" };
        redraw();
      }),
    );
  };

  // One tab per op type, with its count.
  const counts = new Map();
  for (const d of defs) if (d.op_type) counts.set(d.op_type, (counts.get(d.op_type) || 0) + 1);
  const tabs = el("div", { class: "tabs", id: "op-type-tabs", role: "tablist" });
  const tab = (opType, label) => {
    const button = el("button", { type: "button", role: "tab", "data-op-type": opType }, label);
    button.addEventListener("click", () => {
      state.opType = opType;
      tabs.querySelectorAll("button").forEach((b) => b.setAttribute("aria-selected", String(b === button)));
      redraw();
    });
    button.setAttribute("aria-selected", String(opType === ""));
    return button;
  };
  tabs.appendChild(tab("", `all ${defs.length}`));
  for (const [opType, n] of [...counts.entries()].sort()) tabs.appendChild(tab(opType, `${opType} ${n}`));

  const allTags = [...new Set(defs.flatMap(tagsOf))].sort();
  const tagSelect = el(
    "select",
    { id: "kernel-tag", onchange: (e) => ((state.tag = e.target.value), redraw()) },
    el("option", { value: "" }, "every model / tp / ep"),
    allTags.map((t) => el("option", { value: t }, t)),
  );
  const filter = el("input", { type: "search", placeholder: "Filter by name or op type", size: 36, id: "kernel-filter" });
  filter.addEventListener("input", () => {
    state.query = filter.value.trim().toLowerCase();
    redraw();
  });
  redraw();
  content.replaceChildren(
    el("h1", {}, "Kernels"),
    el("p", { class: "subtitle" }, `${defs.length} definitions in the served dataset.`),
    Fib.panel("Definitions", null, tabs, el("div", { class: "toolbar" }, filter, tagSelect), tableBox),
  );
});
