// The leaderboard: fast_p curves per author, the author ranking, and each definition's basis.
// Every number comes from GET /api/leaderboard, which is `fib report summary` and `fib report
// fast-p` computed by the server.
"use strict";

const { el } = Fib;

function totals(summary, baselineAuthor) {
  const t = summary.totals;
  return el(
    "div",
    { class: "stats" },
    Fib.stat("Traces", t.traces.total, "traces"),
    Fib.stat("Passed", t.traces.passed, "passed"),
    Fib.stat("Definitions", t.definitions, "definitions"),
    Fib.stat("Solutions", t.solutions, "solutions"),
    Fib.stat("Workloads", t.workloads, "workloads"),
    Fib.stat("Baseline author", baselineAuthor, "baseline"),
  );
}

// The author series of one definition, or pooled over all of them ("").
function authorSeries(fastP, definition) {
  return definition
    ? fastP.series.filter((s) => s.kind === "author_definition" && s.definition === definition)
    : fastP.series.filter((s) => s.kind === "author");
}

function scoreboard(fastP, authors) {
  const columns = [
    ["Author", (s) => s.name],
    ["Basis", (s) => el("span", { class: `badge ${s.basis === "baseline" ? "" : "muted"}` }, s.basis)],
    ...fastP.p.map((p, k) => [
      `fast_${p}`,
      (s) => Fib.numberCell(s.fast_p[k].fast_p, `${Fib.fixed(s.fast_p[k].fast_p, 1)}%`, `fast_p:${s.name}:${s.basis}:${p}`),
      "num",
    ]),
    ["Compared", (s) => `${s.comparisons} / ${s.possible}`, "num"],
    ["Coverage", (s) => Fib.percent(s.coverage), "num"],
  ];
  return Fib.table(columns, authors, { id: "fastp-table" });
}

function fastPPanel(fastP) {
  if (!authorSeries(fastP, "").length) {
    return Fib.panel("fast_p", null, el("p", { class: "muted" }, "No author has traces compared with a basis yet."));
  }
  let log = true;
  const chartBox = el("div", { class: "chart-box" });
  const tableBox = el("div", {});
  const legendBox = el("div", {});
  const show = (definition) => {
    const authors = authorSeries(fastP, definition);
    const canvas = el("canvas", { id: "fastp-chart" });
    chartBox.replaceChildren(canvas);
    tableBox.replaceChildren(scoreboard(fastP, authors));
    window.fibCharts = window.fibCharts || {};
    if (window.fibCharts.leaderboard) window.fibCharts.leaderboard.destroy();
    requestAnimationFrame(() => {
      const labels = authors.map((s) => (s.basis === "baseline" ? s.name : `${s.name} (vs reference)`));
      window.fibCharts.leaderboard = FibCharts.fastP(
        canvas,
        fastP.p_max,
        authors.map((s, i) => ({ label: labels[i], steps: s.steps })),
        log,
      );
      legendBox.replaceChildren(FibCharts.legend(window.fibCharts.leaderboard, "fastp-legend") || "");
    });
  };
  const withSeries = fastP.definitions.filter((d) => authorSeries(fastP, d.definition).length);
  const select = el(
    "select",
    { id: "fastp-definition", onchange: (e) => show(e.target.value) },
    el("option", { value: "" }, "All definitions (pooled)"),
    withSeries.map((d) => el("option", { value: d.definition }, d.definition)),
  );
  show("");
  const toggle = FibCharts.scaleToggle(
    () => window.fibCharts && window.fibCharts.leaderboard,
    (picked) => {
      log = picked;
    },
  );
  return Fib.panel(
    "fast_p per author",
    "share of compared workloads where the author's solutions passed and were at least p× as fast as the basis",
    el("div", { class: "toolbar chart-controls" }, select, toggle),
    chartBox,
    legendBox,
    el("h2", { style: "margin-top:18px" }, "Scoreboard"),
    tableBox,
  );
}

function rankingPanel(summary) {
  const columns = [
    ["#", (a) => a.rank, "num"],
    ["Author", (a) => el("strong", {}, a.author)],
    ["Basis", (a) => el("span", { class: `badge ${a.basis === "baseline" ? "" : "muted"}` }, a.basis)],
    ["Avg speedup", (a) => Fib.numberCell(a.avg_speedup, Fib.speedup(a.avg_speedup), `avg_speedup:${a.author}:${a.basis}`), "num"],
    ["Success", (a) => Fib.numberCell(a.success_rate, Fib.percent(a.success_rate), `success_rate:${a.author}:${a.basis}`), "num"],
    ["Wins", (a) => Fib.numberCell(a.win_rate, Fib.percent(a.win_rate), `win_rate:${a.author}:${a.basis}`), "num"],
    ["Workloads", (a) => Fib.numberCell(a.workloads, a.workloads, `workloads:${a.author}:${a.basis}`), "num"],
    ["Definitions", (a) => a.definitions, "num"],
    [
      "Best solutions",
      (a) =>
        Object.entries(a.best_solutions).map(([def, sol]) =>
          el("a", { class: "chip", href: `kernel.html?name=${encodeURIComponent(def)}`, title: `best on ${def}` }, sol),
        ),
    ],
  ];
  const body = summary.rankings.length
    ? Fib.table(columns, summary.rankings, { id: "ranking-table" })
    : el("p", { class: "muted" }, "No author to rank yet.");
  const notes = summary.notes.length ? el("ul", { class: "notes" }, summary.notes.map((n) => el("li", {}, n))) : null;
  return Fib.panel(
    "Author ranking",
    `average of basis latency / author latency over compared workloads; a failed workload counts 0`,
    body,
    notes,
  );
}

// Each author's traces by status (`fib report summary`'s correctness per author): the statuses
// some author reached are the columns.
function correctnessPanel(summary) {
  const authors = summary.authors || [];
  if (!authors.some((a) => a.traces.total)) return null;
  const statuses = Object.keys(authors[0].traces.by_status).filter((s) => authors.some((a) => a.traces.by_status[s]));
  const name = (a) => a.author || "(unknown solution)";
  const columns = [
    ["Author", (a) => el("strong", {}, name(a))],
    ["Solutions", (a) => a.solutions, "num"],
    ["Traces", (a) => a.traces.total, "num"],
    ...statuses.map((s) => [
      s,
      (a) => Fib.numberCell(a.traces.by_status[s], a.traces.by_status[s] || "·", `status:${name(a)}:${s}`),
      "num",
    ]),
    ["Passed", (a) => Fib.percent(a.traces.total ? a.traces.passed / a.traces.total : 0), "num"],
  ];
  return Fib.panel(
    "Correctness per author",
    "every trace of the author's solutions, by status",
    Fib.table(columns, authors.filter((a) => a.traces.total), { id: "correctness-table" }),
  );
}

function basisPanel(fastP) {
  const columns = [
    ["Definition", (d) => Fib.kernelLink(d.definition)],
    ["Basis", (d) => d.basis_description],
    ["Workloads with a basis", (d) => d.basis_workloads, "num"],
  ];
  const notes = fastP.notes.length ? el("ul", { class: "notes" }, fastP.notes.map((n) => el("li", {}, n))) : null;
  return Fib.panel("What each definition is compared with", null, Fib.table(columns, fastP.definitions, { id: "basis-table" }), notes);
}

Fib.run("index.html", async (content) => {
  const data = await Fib.api("/api/leaderboard");
  content.replaceChildren();
  Fib.append(content, [
    el("h1", {}, "Leaderboard"),
    el(
      "p",
      { class: "subtitle" },
      "Solutions ranked against the baseline author's solutions (or, for a definition without one, " +
        "the reference latency in its traces).",
    ),
    totals(data.summary, data.baseline_author),
    fastPPanel(data.fast_p),
    rankingPanel(data.summary),
    correctnessPanel(data.summary),
    basisPanel(data.fast_p),
  ]);
});
