// Task status (task.html?id=ID): what GET /tasks/{id} says about an evaluation submitted with
// POST /evaluate, refreshed until it is completed or failed.
"use strict";

const { el } = Fib;

const finished = (status) => status === "completed" || status === "failed";

// The traces' statuses that are not PASSED, counted: {COMPILE_ERROR: 1, ...}.
function failures(task) {
  const out = {};
  for (const t of task.traces || []) {
    const status = (t.evaluation && t.evaluation.status) || "no evaluation";
    if (status !== "PASSED") out[status] = (out[status] || 0) + 1;
  }
  return out;
}

// "completed" is green only when every workload passed: a task that completed with a compile
// error is finished, not a success.
function statusBadge(task) {
  const failed = Object.entries(failures(task));
  const kind =
    task.status === "failed" || (task.status === "completed" && failed.length)
      ? "bad"
      : task.status === "completed"
        ? "good"
        : "warn";
  return [
    el("span", { class: `badge ${kind}`, id: "task-status" }, task.status),
    failed.length
      ? el("span", { class: "badge bad", id: "task-failures", style: "margin-left:6px" }, failed.map(([s, n]) => `${n} ${s}`).join(", "))
      : null,
  ];
}

// Each trace's build or run log (the evaluation's `log`), folded.
function logsPanel(task) {
  const logged = (task.traces || []).filter((t) => t.evaluation && t.evaluation.log);
  if (!logged.length) return null;
  return Fib.panel(
    "Logs",
    "the build's or the run's output, per workload",
    el(
      "div",
      { id: "task-logs" },
      logged.map((t) =>
        el(
          "details",
          { open: t.evaluation.status !== "PASSED" },
          el("summary", {}, `${axesText(t.workload.axes) || t.workload.uuid} · ${t.evaluation.status}`),
          el("pre", { class: "code" }, t.evaluation.log),
        ),
      ),
    ),
  );
}

const axesText = (axes) =>
  Object.entries(axes || {})
    .map(([a, v]) => `${a}=${v}`)
    .join(" ");

function tracesTable(task) {
  const traces = task.traces || [];
  if (!traces.length) return el("p", { class: "muted" }, finished(task.status) ? "No traces." : "Waiting for results…");
  const ids = task.trace_ids || [];
  return Fib.table(
    [
      ["", (t) => (ids[traces.indexOf(t)] ? Fib.traceLink(t.definition, ids[traces.indexOf(t)], "view") : "")],
      ["Workload", (t) => el("code", {}, axesText(t.workload.axes) || t.workload.uuid)],
      ["Status", (t) => Fib.statusBadge(t.evaluation && t.evaluation.status)],
      ["Latency", (t) => Fib.latency(t.evaluation && t.evaluation.performance ? t.evaluation.performance.latency_ms : null), "num"],
      [
        "vs reference",
        (t) => {
          const p = t.evaluation && t.evaluation.performance;
          return p && p.speedup_factor > 0 ? Fib.speedup(p.speedup_factor) : "–";
        },
        "num",
      ],
      ["Hardware", (t) => el("span", { class: "muted" }, (t.evaluation && t.evaluation.environment.hardware) || "")],
    ],
    traces,
    { id: "task-traces" },
  );
}

function renderTask(box, task) {
  box.replaceChildren(
    Fib.panel(
      "Task",
      null,
      el(
        "dl",
        { class: "kv" },
        el("dt", {}, "ID"),
        el("dd", {}, el("code", {}, task.task_id)),
        el("dt", {}, "Status"),
        el("dd", {}, statusBadge(task)),
        el("dt", {}, "Definition"),
        el("dd", {}, task.definition ? Fib.kernelLink(task.definition) : "–"),
        el("dt", {}, "Solution"),
        el("dd", {}, task.solution || "–"),
      ),
      task.error ? el("div", { class: "message error", style: "margin-top:12px" }, task.error) : null,
    ),
    Fib.panel("Results", null, tracesTable(task)),
    logsPanel(task),
  );
}

// A listed task's traces by evaluation status ("3 PASSED", "1 INCORRECT_NUMERICAL"), failures
// first; a dash until it has traces.
function outcomeBadges(task) {
  const entries = Object.entries(task.outcome || {}).sort(([a], [b]) => (a === "PASSED") - (b === "PASSED"));
  if (!entries.length) return el("span", { class: "muted" }, "–");
  return el(
    "span",
    { class: "nowrap", "data-field": "outcome" },
    entries.map(([status, n]) => el("span", { class: "badge-count" }, `${n} `, Fib.statusBadge(status))),
  );
}

// The newest tasks (GET /tasks: the server's, or an author's token's own) and the count of each
// status, queue included.
function taskList(data) {
  const counts = Object.entries(data.counts || {})
    .map(([status, n]) => `${n} ${status}`)
    .join(" · ");
  const body = data.tasks.length
    ? Fib.table(
        [
          ["Task", (t) => el("a", { href: `task.html?id=${encodeURIComponent(t.task_id)}` }, el("code", {}, t.task_id.slice(0, 8)))],
          ["Status", (t) => el("span", { class: `badge ${t.status === "failed" ? "bad" : t.status === "completed" ? "muted" : "warn"}` }, t.status)],
          ["Definition", (t) => (t.definition ? Fib.kernelLink(t.definition) : "–")],
          ["Solution", (t) => t.solution || "–"],
          ["Outcome", outcomeBadges],
          ["Workloads", (t) => (t.workload_uuids || []).length || "all", "num"],
          ["Submitted", (t) => el("span", { class: "muted small nowrap" }, t.created || "")],
          ["Updated", (t) => el("span", { class: "muted small nowrap" }, t.updated || "")],
        ],
        data.tasks,
        { id: "tasks-table" },
      )
    : el("p", { class: "muted" }, "No tasks yet.");
  return Fib.panel("Tasks", counts, body);
}

function lookupForm(id) {
  const input = el("input", { type: "text", name: "id", value: id || "", placeholder: "task id", size: 40 });
  return el(
    "form",
    { class: "toolbar", method: "get", action: "task.html" },
    input,
    el("button", { type: "submit" }, "Show"),
  );
}

Fib.run("task.html", async (content) => {
  const id = Fib.param("id");
  const box = el("div", { id: "task-box" });
  content.replaceChildren(
    el("h1", {}, "Task status"),
    el("p", { class: "subtitle" }, "Evaluations submitted with POST /evaluate run in the server's queue; this page follows one."),
    lookupForm(id),
    box,
  );
  if (!id) {
    box.replaceChildren(taskList(await Fib.api("/tasks?limit=100")));
    return;
  }
  const task = await Fib.api(`/tasks/${encodeURIComponent(id)}`);
  renderTask(box, task);
  if (!finished(task.status)) follow(box, id).catch((error) => Fib.showError(box, error));
});

// Long-polls until the task is finished: the server answers when it finishes or after the
// timeout.
async function follow(box, id) {
  for (;;) {
    const task = await Fib.api(`/tasks/${encodeURIComponent(id)}?timeout=10`);
    renderTask(box, task);
    if (finished(task.status)) return;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}
