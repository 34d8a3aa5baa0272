// The trace viewer: one trace of the dataset (trace.html?definition=D&id=ID) with its
// evaluation, workload and solution sources, or a trace pasted as JSON.
"use strict";

const { el } = Fib;

const languageOf = (path) => {
  if (/\.(py)$/.test(path)) return "python";
  if (/\.(cu|cuh|cpp|cc|cxx|h|hpp|c)$/.test(path)) return "cpp";
  return null;
};

function evaluationPanel(trace, extra) {
  const e = trace.evaluation;
  if (!e) return Fib.panel("Evaluation", null, el("p", { class: "muted" }, "A workload record: no solution, no evaluation."));
  const perf = e.performance || {};
  const corr = e.correctness || {};
  const facts = [
    ["Status", Fib.statusBadge(e.status)],
    ["Solution", trace.solution || "–"],
    ["Latency", Fib.latency(perf.latency_ms)],
    ["Reference latency", Fib.latency(perf.reference_latency_ms)],
    ["Speedup vs reference", perf.speedup_factor > 0 ? Fib.speedup(perf.speedup_factor) : "–"],
    ["Max absolute error", corr.max_absolute_error === undefined ? "–" : String(corr.max_absolute_error)],
    ["Max relative error", corr.max_relative_error === undefined ? "–" : String(corr.max_relative_error)],
    ["Hardware", (e.environment && e.environment.hardware) || "–"],
    ["Timestamp", e.timestamp || "–"],
  ];
  if (extra) {
    const untrusted = extra.signer ? `signed by an untrusted key ${extra.signer.slice(0, 16)}…` : "unsigned";
    const signature = extra.verified
      ? el("span", { class: "badge good", title: extra.signer }, `verified (${extra.signer.slice(0, 16)}…)`)
      : el("span", { class: "badge muted" }, untrusted);
    facts.push(["Signature", signature]);
    facts.push(["Stored in", el("code", {}, extra.source)]);
  }
  const kv = el("dl", { class: "kv", id: "trace-facts" }, facts.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  const log = e.log ? [el("h2", { style: "margin-top:16px" }, "Log"), el("pre", { class: "code log" }, e.log)] : null;
  return Fib.panel("Evaluation", null, kv, log);
}

function workloadPanel(workload) {
  const axes = Object.entries(workload.axes || {}).map(([a, v]) => `${a}=${v}`).join(" ");
  const inputs = Object.entries(workload.inputs || {}).map(([name, input]) => ({ name, ...input }));
  return Fib.panel(
    "Workload",
    null,
    el(
      "dl",
      { class: "kv" },
      [el("dt", {}, "UUID"), el("dd", {}, el("code", {}, workload.uuid))],
      [el("dt", {}, "Axes"), el("dd", {}, el("code", {}, axes || "–"))],
    ),
    inputs.length
      ? Fib.table(
          [
            ["Input", (i) => el("code", {}, i.name)],
            ["Kind", (i) => i.type],
            ["Value", (i) => (i.value !== undefined ? String(i.value) : i.path ? `${i.path}:${i.tensor_key}` : "")],
          ],
          inputs,
        )
      : null,
  );
}

function solutionPanel(solution) {
  if (!solution) return null;
  const spec = solution.spec || {};
  return Fib.panel(
    `Solution ${solution.name}`,
    `${solution.author} · ${spec.language}${spec.binding ? ` · ${spec.binding}` : ""} · entry ${spec.entry_point}`,
    solution.description ? el("p", {}, solution.description) : null,
    solution.sources.map((s) => [
      el("h2", { style: "margin-top:12px;font-size:15px" }, el("code", {}, s.path)),
      Fib.code(s.content, languageOf(s.path)),
    ]),
  );
}

function render(content, trace, extra) {
  const title = extra ? [Fib.kernelLink(extra.definition), ` · trace ${extra.id}`] : "Pasted trace";
  content.replaceChildren(el("h1", { id: "trace-title" }, title));
  Fib.append(content, [
    el("p", { class: "subtitle" }, trace.definition ? ["Definition ", Fib.kernelLink(trace.definition)] : ""),
    el("div", { class: "two-col" }, evaluationPanel(trace, extra), workloadPanel(trace.workload || {})),
    solutionPanel(extra ? extra.solution : null),
    rawPanel(trace, extra),
  ]);
}

// The trace as JSON, to copy or download: one line, as a traces/*.jsonl file holds it (what
// `fib trace show`, `fib validate` and upstream's tools read). A trace from the server comes as
// the server's text: a browser's numbers would lose a 64-bit seed's low digits.
function rawPanel(trace, extra) {
  const url = extra
    ? `../api/traces?definition=${encodeURIComponent(extra.definition)}&id=${encodeURIComponent(extra.id)}&format=jsonl`
    : URL.createObjectURL(new Blob([JSON.stringify(trace) + "\n"], { type: "application/x-ndjson" }));
  const name = extra ? `${extra.definition}-${extra.id}.jsonl` : "trace.jsonl";
  const download = el("a", { id: "trace-download", class: "button", download: name, href: url }, "Download");
  const said = el("span", { class: "muted small", id: "trace-copied" });
  const copy = async () => {
    try {
      const line = await (await fetch(url, { credentials: "same-origin" })).text();
      await navigator.clipboard.writeText(line.trimEnd());
      said.textContent = "copied";
    } catch (error) {
      said.textContent = `not copied: ${error.message || error}`;
    }
  };
  return Fib.panel(
    "Raw trace",
    null,
    el("div", { class: "toolbar", style: "margin-bottom:10px" }, el("button", { onclick: copy, id: "trace-copy" }, "Copy JSON"), " ", download, " ", said),
    Fib.code(JSON.stringify(trace, null, 2), "json"),
  );
}

function pasteForm(content) {
  const example = '{"definition": "...", "workload": {...}, "solution": "...", "evaluation": {...}}';
  const area = el("textarea", { id: "trace-json", placeholder: example });
  const out = el("div", {});
  const show = () => {
    try {
      render(out, JSON.parse(area.value), null);
    } catch (error) {
      Fib.showError(out, error);
    }
  };
  content.replaceChildren(
    el("h1", {}, "Trace viewer"),
    el("p", { class: "subtitle" }, "Open a trace from a kernel page, or paste one trace (a line of a traces/*.jsonl file)."),
    Fib.panel(
      "Paste a trace",
      null,
      area,
      el("div", { class: "toolbar", style: "margin-top:10px" }, el("button", { onclick: show }, "Show")),
    ),
    out,
  );
}

Fib.run("trace.html", async (content) => {
  const definition = Fib.param("definition");
  const id = Fib.param("id");
  if (!definition || id === null) {
    pasteForm(content);
    return;
  }
  const data = await Fib.api(`/api/traces?definition=${encodeURIComponent(definition)}&id=${encodeURIComponent(id)}`);
  document.title = `${definition} trace ${id} · fib`;
  render(content, data.trace, data);
});
