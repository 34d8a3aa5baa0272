// One kernel definition: its interface (axes, constraints, inputs, outputs), the reference,
// its solutions ranked (`fib report best`) with their fast_p, its workloads and traces.
"use strict";

const { el } = Fib;

function header(k) {
  const d = k.definition;
  const tags = d ? d.tags.filter((t) => !t.startsWith("model:")) : [];
  return [
    el("h1", { id: "kernel-name" }, k.name),
    el(
      "p",
      { class: "subtitle" },
      d ? el("span", { class: "badge" }, d.op_type) : el("span", { class: "badge warn" }, "no definition file"),
      " ",
      d && d.description ? d.description : "",
    ),
    el(
      "div",
      { class: "toolbar" },
      k.models.length
        ? el("span", { id: "kernel-models" }, "Used by ", Fib.joined(k.models.map((m) => Fib.modelLink(m)), ", "))
        : null,
      tags.map((t) => el("span", { class: "chip absent" }, t)),
    ),
  ];
}

function shapeText(shape) {
  return shape === null || shape === undefined ? "scalar" : `[${shape.join(", ")}]`;
}

function interfacePanels(d, nativeReference) {
  const axes = Object.entries(d.axes).map(([name, a]) => ({ name, ...a }));
  const axisTable = Fib.table(
    [
      ["Axis", (a) => el("code", {}, a.name)],
      ["Kind", (a) => el("span", { class: `badge ${a.type === "const" ? "muted" : ""}` }, a.type)],
      ["Value", (a) => (a.value === undefined ? "per workload" : String(a.value)), "num"],
      ["Description", (a) => a.description || ""],
    ],
    axes,
    { id: "axes-table" },
  );
  const tensors = (specs) =>
    Fib.table(
      [
        ["Name", (t) => el("code", {}, t.name)],
        ["Shape", (t) => el("code", {}, shapeText(t.shape))],
        ["Dtype", (t) => el("span", { class: "badge muted" }, t.dtype)],
        ["Description", (t) => t.description || ""],
      ],
      Object.entries(specs).map(([name, t]) => ({ name, ...t })),
    );
  const constraints = (d.constraints || []).length
    ? el("ul", {}, d.constraints.map((c) => el("li", {}, el("code", {}, c))))
    : el("p", { class: "muted" }, "None.");
  return [
    el("div", { class: "two-col" }, Fib.panel("Axes", null, axisTable), Fib.panel("Constraints", null, constraints)),
    el("div", { class: "two-col" }, Fib.panel("Inputs", null, tensors(d.inputs)), Fib.panel("Outputs", null, tensors(d.outputs))),
    Fib.panel("Reference", referenceCaption(nativeReference), Fib.code(d.reference, "python")),
  ];
}

const maxChartSeries = 50;

// Which reference fib checks solutions against (`fib run --reference auto`): its native kernel
// where the op type has one, else this PyTorch function.
function referenceCaption(nativeReference) {
  return nativeReference
    ? `the definition's PyTorch function; fib checks solutions against its native reference ${nativeReference}, which computes the same`
    : "the PyTorch function every solution is checked against (fib has no native reference for this op type)";
}

const solutionsPageSize = 100;

// The ranked solutions, a page at a time (a definition may have thousands: a table of them all is
// slow to draw and to read), with a pager like the traces'.
function solutionsPanel(k) {
  const ranking = k.ranking;
  const series = new Map(k.fast_p.series.map((s) => [s.name, s]));
  const pIndex = k.fast_p.p.indexOf(1);
  const all = ranking ? ranking.candidates : [];
  // Filters by language, author and hardware (the solution's spec), applied to the table and to
  // the chart's curves.
  const specs = new Map((k.solutions || []).map((s) => [s.name, s]));
  const facets = {
    language: (c) => [((specs.get(c.solution) || {}).spec || {}).language || "unknown"],
    author: (c) => [c.author || "unknown"],
    hardware: (c) => ((specs.get(c.solution) || {}).spec || {}).target_hardware || ["unknown"],
  };
  const picked = { language: "", author: "", hardware: "" };
  const keep = (c) => Object.entries(picked).every(([f, v]) => !v || facets[f](c).includes(v));
  let candidates = all;
  // Ranks are counted over the whole list, so that page 2 goes on from page 1.
  const ranks = new Map();
  all.filter((c) => c.eligible).forEach((c, i) => ranks.set(c, i + 1));
  const columns = [
    ["#", (c) => ranks.get(c) || "–", "num"],
    [
      "Solution",
      (c) => el("span", {}, el("strong", {}, c.solution), c.is_baseline ? el("span", { class: "badge muted" }, " baseline") : null),
    ],
    ["Author", (c) => c.author],
    [
      "Geomean speedup",
      (c) => Fib.numberCell(c.geomean_speedup, c.eligible ? Fib.speedup(c.geomean_speedup) : "–", `geomean:${c.solution}`),
      "num",
    ],
    ["Range", (c) => (c.eligible ? `${Fib.fixed(c.min_speedup)}–${Fib.fixed(c.max_speedup)}×` : "–"), "num"],
    [
      "fast_1",
      (c) => {
        const s = series.get(c.solution);
        return s && pIndex >= 0 ? `${Fib.fixed(s.fast_p[pIndex].fast_p, 1)}%` : "–";
      },
      "num",
    ],
    ["Workloads", (c) => `${c.workloads} / ${c.attempted}`, "num"],
    ["Failed", (c) => c.failed, "num"],
    [
      "Status",
      (c) =>
        c.eligible
          ? el("span", { class: "badge good" }, "ranked")
          : [el("span", { class: "badge bad" }, "not ranked"), el("div", { class: "muted small" }, c.reason)],
    ],
    [
      "Traces",
      (c) =>
        el(
          "a",
          { href: "#traces", class: "nowrap", "data-solution": c.solution, onclick: () => filterTraces(c.solution) },
          `${c.traces} traces`,
        ),
    ],
  ];
  const body = el("div", { id: "solutions-box" });
  const showPage = (page) => {
    const pages = Math.max(1, Math.ceil(candidates.length / solutionsPageSize));
    const go = (n) => el("a", { href: "#solutions-box", onclick: () => showPage(n) });
    const pager =
      pages > 1
        ? el(
            "p",
            { class: "pager", id: "solutions-pager" },
            page > 1 ? Fib.append(go(page - 1), ["‹ previous"]) : null,
            ` page ${page} of ${pages} (${candidates.length} solutions) `,
            page < pages ? Fib.append(go(page + 1), ["next ›"]) : null,
          )
        : null;
    const rows = candidates.slice((page - 1) * solutionsPageSize, page * solutionsPageSize);
    body.replaceChildren();
    Fib.append(body, [
      candidates.length
        ? Fib.table(columns, rows, { id: "solutions-table" })
        : el("p", { class: "muted" }, all.length ? "No solution matches the filters." : "No solutions yet."),
      pager,
    ]);
  };
  const filterBar = el("div", { class: "toolbar", id: "solution-filters" });
  const applyFilters = () => {
    candidates = all.filter(keep);
    showPage(1);
    if (redrawChart) redrawChart();
  };
  for (const facet of Object.keys(facets)) {
    const values = [...new Set(all.flatMap(facets[facet]))].sort();
    if (values.length < 2) continue;
    const select = el(
      "select",
      { id: `solution-filter-${facet}`, onchange: (e) => ((picked[facet] = e.target.value), applyFilters()) },
      el("option", { value: "" }, `every ${facet}`),
      values.map((v) => el("option", { value: v }, v)),
    );
    filterBar.appendChild(select);
  }
  let redrawChart = null;
  showPage(1);
  const basis = ranking ? el("p", { class: "muted" }, `Basis: ${ranking.basis_description}. Ranking: ${k.best_rule}.`) : null;
  // Only solutions that passed on some workload: a curve at 0 everywhere says nothing.
  // Only solutions that passed on some workload (a curve at 0 everywhere says nothing), the
  // best 50 at p = 1 (thousands of series make the page slow and say nothing more); the first
  // ten are drawn, the legend shows or hides the others.
  const atP1 = (s) => (pIndex >= 0 ? s.fast_p[pIndex].fast_p : 0);
  const candidateOf = new Map(all.map((c) => [c.solution, c]));
  const shownSeries = () =>
    k.fast_p.series
      .filter((s) => s.comparisons > 0 && s.steps.fast_p.some((v) => v > 0))
      .filter((s) => !candidateOf.has(s.name) || keep(candidateOf.get(s.name)))
      .sort((a, b) => atP1(b) - atP1(a));
  const passed = shownSeries();
  const chartSeries = passed.slice(0, maxChartSeries);
  let chart = null;
  if (chartSeries.length) {
    const canvas = el("canvas", { id: "kernel-fastp-chart" });
    const legendBox = el("div", {});
    chart = [
      el("h2", { style: "margin-top:18px" }, "fast_p per solution"),
      passed.length > chartSeries.length
        ? el("p", { class: "muted small" }, `The best ${chartSeries.length} of ${passed.length} solutions that passed somewhere, by fast_p at p = 1.`)
        : null,
      FibCharts.scaleToggle(() => window.fibCharts && window.fibCharts.kernel),
      el("div", { class: "chart-box", style: "height:280px" }, canvas),
      legendBox,
    ];
    const draw = (series) => {
      window.fibCharts = window.fibCharts || {};
      if (window.fibCharts.kernel) window.fibCharts.kernel.destroy();
      window.fibCharts.kernel = FibCharts.fastP(
        canvas,
        k.fast_p.p_max,
        series.map((s) => ({ label: s.name, steps: s.steps })),
        true,
        10,
      );
      legendBox.replaceChildren(FibCharts.legend(window.fibCharts.kernel, "kernel-fastp-legend") || "");
    };
    redrawChart = () => draw(shownSeries().slice(0, maxChartSeries));
    requestAnimationFrame(() => draw(chartSeries));
  }
  return Fib.panel("Solutions", "ranked by geometric-mean speedup over the basis", filterBar, body, basis, chart);
}

let kernelName = "";
const tracesPageSize = 50;

function tracesTable(traces) {
  return Fib.table(
    [
      ["", (t) => Fib.traceLink(kernelName, t.id, "view")],
      ["Solution", (t) => [t.solution, el("div", { class: "muted small" }, t.author || "")]],
      ["Workload", (t) => el("code", { title: t.workload }, Object.entries(t.axes).map(([a, v]) => `${a}=${v}`).join(" "))],
      ["Status", (t) => Fib.statusBadge(t.status)],
      ["Latency", (t) => Fib.latency(t.latency_ms), "num"],
      ["vs reference", (t) => (t.speedup_factor > 0 ? Fib.speedup(t.speedup_factor) : "–"), "num"],
      ["Hardware", (t) => el("span", { class: "muted small nowrap" }, t.hardware || "")],
      [
        "Signed",
        (t) => (t.verified ? el("span", { class: "badge good" }, "verified") : el("span", { class: "badge muted" }, "unverified")),
      ],
    ],
    traces,
    { id: "traces-table" },
  );
}

// The pager under a page of traces: previous, "page N of M", next.
function tracesPager(data, solution) {
  const pages = Math.max(1, Math.ceil(data.total / data.page_size));
  const go = (page) => el("a", { href: "#traces", onclick: () => filterTraces(solution, page) });
  const prev = data.page > 1 ? Fib.append(go(data.page - 1), ["‹ previous"]) : null;
  const next = data.page < pages ? Fib.append(go(data.page + 1), ["next ›"]) : null;
  return el("p", { class: "pager", id: "traces-pager" }, prev, ` page ${data.page} of ${pages} (${data.total} traces) `, next);
}

// One page of the definition's traces (of one solution when given), read from /api/traces.
async function filterTraces(solution, page = 1) {
  const box = document.getElementById("traces-box");
  const query = new URLSearchParams({ definition: kernelName, page, page_size: tracesPageSize });
  if (solution) query.set("solution", solution);
  const data = await Fib.api(`/api/traces?${query}`);
  box.replaceChildren();
  Fib.append(box, [
    solution
      ? el("p", {}, `Traces of ${solution} · `, el("a", { href: "#traces", onclick: () => filterTraces(null) }, "show all"))
      : null,
    data.traces.length ? [tracesTable(data.traces), tracesPager(data, solution)] : el("p", { class: "muted" }, "No traces yet."),
  ]);
}

function workloadsPanel(k) {
  const body = k.workloads.length
    ? Fib.table(
        [
          ["UUID", (w) => el("code", {}, w.uuid)],
          ["Axes", (w) => el("code", {}, Object.entries(w.axes).map(([a, v]) => `${a}=${v}`).join(" "))],
        ],
        k.workloads,
        { id: "workloads-table" },
      )
    : el("p", { class: "muted" }, "No workloads.");
  return Fib.panel("Workloads", `${k.workloads.length}`, body);
}

Fib.run("kernels.html", async (content) => {
  const name = Fib.param("name");
  if (!name) throw new Error("Give a definition: kernel.html?name=NAME (see Kernels).");
  const k = await Fib.api(`/api/kernels/${encodeURIComponent(name)}`);
  document.title = `${k.name} · fib`;
  kernelName = k.name;
  content.replaceChildren();
  Fib.append(content, [
    header(k),
    k.definition ? interfacePanels(k.definition, k.native_reference) : null,
    solutionsPanel(k),
    workloadsPanel(k),
    el(
      "section",
      { class: "panel", id: "traces" },
      el("h2", {}, "Traces", el("span", { class: "hint" }, `${k.trace_count}`)),
      el("div", { id: "traces-box" }),
    ),
  ]);
  await filterTraces(null);
});
