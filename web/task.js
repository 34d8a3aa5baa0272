// Task status (task.html?id=ID): what GET /tasks/{id} says about an evaluation submitted with
// POST /evaluate, refreshed until it is completed or failed.
"use strict";

const { el } = Fib;

const finished = (status) => status === "completed" || status === "failed";

function statusBadge(status) {
  const kind = status === "completed" ? "good" : status === "failed" ? "bad" : "warn";
  return el("span", { class: `badge ${kind}`, id: "task-status" }, status);
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
        el("dd", {}, statusBadge(task.status)),
        el("dt", {}, "Definition"),
        el("dd", {}, task.definition ? Fib.kernelLink(task.definition) : "–"),
        el("dt", {}, "Solution"),
        el("dd", {}, task.solution || "–"),
      ),
      task.error ? el("div", { class: "message error", style: "margin-top:12px" }, task.error) : null,
    ),
    Fib.panel("Results", null, tracesTable(task)),
  );
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
  if (!id) return;
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
