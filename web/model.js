// One model: its module tree (blocks and layers with counts), each module linked to the
// definitions it runs, and the list of those definitions.
"use strict";

const { el } = Fib;

// A definition chip: a link when the dataset holds it, grey when onboarding would create it.
function definitionChip(name, held) {
  return held.has(name)
    ? el("a", { class: "chip", href: `kernel.html?name=${encodeURIComponent(name)}` }, name)
    : el("span", { class: "chip absent", title: "not in the served dataset (fib onboard would create it)" }, name);
}

function moduleTree(graph, held) {
  const children = new Map();
  const roots = [];
  for (const [name, m] of Object.entries(graph.modules)) {
    if (m.parent && graph.modules[m.parent]) {
      if (!children.has(m.parent)) children.set(m.parent, []);
      children.get(m.parent).push(name);
    } else {
      roots.push(name);
    }
  }
  const node = (name) => {
    const m = graph.modules[name];
    const label = el(
      "span",
      { class: "module", "data-module": name },
      el("span", { class: "name" }, name),
      el("span", { class: `badge ${m.type === "block" ? "muted" : ""}` }, m.type),
      m.count > 1 ? el("span", { class: "count" }, `×${m.count}`) : null,
      (m.definitions || []).map((d) => definitionChip(d, held)),
    );
    const kids = children.get(name) || [];
    return el("li", {}, label, kids.length ? el("ul", {}, kids.map(node)) : null);
  };
  return el("ul", { class: "tree", id: "module-tree" }, roots.map(node));
}

function definitionsTable(list) {
  return Fib.table(
    [
      ["Definition", (d) => (d.in_dataset ? Fib.kernelLink(d.name) : el("span", { class: "muted" }, d.name))],
      ["Op type", (d) => el("span", { class: "badge muted" }, d.op_type)],
      ["In dataset", (d) => (d.in_dataset ? el("span", { class: "badge good" }, "yes") : el("span", { class: "badge muted" }, "no"))],
      ["Traces", (d) => d.traces, "num"],
    ],
    list,
    { id: "model-definitions" },
  );
}

// The kernel inventory: each definition with the engine kernels computing it and its calls per
// forward, then the catalogue's kernels this model does not call and what configuration does.
function inventoryPanels(inventory, held) {
  const engine = (k) => el("div", {}, el("code", {}, k.kernel), el("span", { class: "muted" }, ` · ${k.library} · ${k.backend}`));
  const called = Fib.panel(
    "Kernel inventory",
    `${inventory.kernels.length} definitions at the default serving setup (fib models SLUG --kernels)`,
    Fib.table(
      [
        ["Category", (r) => r.category],
        ["Definition", (r) => definitionChip(r.definition, held)],
        ["Calls per forward", (r) => r.calls_per_forward, "num"],
        ["Engine kernels (library · backend)", (r) => (r.kernels.length ? r.kernels.map(engine) : el("span", { class: "muted" }, "none catalogued"))],
      ],
      inventory.kernels,
      { id: "model-inventory" },
    ),
  );
  const idle = inventory.not_called.length
    ? Fib.panel(
        "Engine kernels not called at this serving setup",
        null,
        Fib.table(
          [
            ["Kernel", (k) => el("code", {}, k.kernel)],
            ["Library", (k) => k.library],
            ["Runs with", (k) => k.reason.replace(/^not called at this serving setup; runs with /, "")],
          ],
          inventory.not_called,
          { id: "model-not-called" },
        ),
      )
    : null;
  return [called, idle];
}

Fib.run("models.html", async (content) => {
  const id = Fib.param("id");
  if (!id) throw new Error("Give a model: model.html?id=SLUG (see Models).");
  const m = await Fib.api(`/api/models/${encodeURIComponent(id)}`);
  document.title = `${m.name} · fib`;
  const held = new Set(m.definition_list.filter((d) => d.in_dataset).map((d) => d.name));
  const facts = m.bundled
    ? el(
        "div",
        { class: "stats" },
        Fib.stat("Family", m.family),
        Fib.stat("Layers", m.layers),
        Fib.stat("Parameters", m.parameters_text),
        Fib.stat("Definitions", m.definitions),
        Fib.stat("In dataset", held.size, "in-dataset"),
      )
    : null;
  const tree = m.graph
    ? Fib.panel(
        "Module tree",
        `${Object.keys(m.graph.modules).length} modules; blue definitions are in the dataset`,
        moduleTree(m.graph, held),
      )
    : Fib.panel(
        "Module tree",
        null,
        el("p", { class: "muted" }, "Not a bundled model: the dataset only records which definitions are tagged with it."),
      );
  const unsupported =
    m.unsupported && m.unsupported.length
      ? Fib.panel(
          "Not covered by an op family",
          null,
          Fib.table(
            [
              ["Module", (u) => el("code", {}, u.module || "model")],
              ["Component", (u) => u.component],
              ["Why", (u) => u.reason],
              ["Severity", (u) => el("span", { class: `badge ${u.severity === "warning" ? "warn" : "muted"}` }, u.severity)],
            ],
            m.unsupported,
          ),
        )
      : null;
  content.replaceChildren(
    el("h1", {}, m.name),
    el(
      "p",
      { class: "subtitle" },
      el("code", {}, m.id),
      m.hf_repo ? ` · ${m.hf_repo}` : "",
      m.graph && m.graph.description ? ` · ${m.graph.description}` : "",
    ),
  );
  const definitions = Fib.panel("Definitions", `${m.definition_list.length}`, definitionsTable(m.definition_list));
  const inventory = m.inventory ? inventoryPanels(m.inventory, held) : [];
  Fib.append(content, [facts, tree, ...inventory, definitions, unsupported]);
});
