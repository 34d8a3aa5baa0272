// Every definition of the dataset with its workloads, solutions and traces, filterable.
"use strict";

const { el } = Fib;

function kernelRows(summary) {
  const columns = [
    [
      "Definition",
      (d) =>
        d.has_definition ? Fib.kernelLink(d.name) : el("span", {}, d.name, el("span", { class: "muted" }, " (no definition file)")),
    ],
    ["Op type", (d) => (d.op_type ? el("span", { class: "badge muted" }, d.op_type) : "–")],
    ["Workloads", (d) => d.workloads, "num"],
    ["Solutions", (d) => d.solutions, "num"],
    ["Traces", (d) => d.traces.total, "num"],
    ["Passed", (d) => d.traces.passed, "num"],
    ["Failed", (d) => d.traces.failed, "num"],
    ["Basis", (d) => (d.basis === "baseline" ? d.baseline_solutions.join(", ") : el("span", { class: "muted" }, "reference"))],
  ];
  return Fib.table(columns, summary.definitions, { id: "kernels-table" });
}

Fib.run("kernels.html", async (content) => {
  const data = await Fib.api("/api/leaderboard");
  const defs = data.summary.definitions;
  const filter = el("input", { type: "search", placeholder: "Filter by name or op type", size: 36, id: "kernel-filter" });
  const tableBox = el("div", {}, kernelRows(data.summary));
  filter.addEventListener("input", () => {
    const q = filter.value.trim().toLowerCase();
    const shown = defs.filter((d) => !q || d.name.toLowerCase().includes(q) || (d.op_type || "").toLowerCase().includes(q));
    tableBox.replaceChildren(kernelRows({ definitions: shown }));
  });
  content.replaceChildren(
    el("h1", {}, "Kernels"),
    el("p", { class: "subtitle" }, `${defs.length} definitions in the served dataset.`),
    Fib.panel("Definitions", null, el("div", { class: "toolbar" }, filter), tableBox),
  );
});
