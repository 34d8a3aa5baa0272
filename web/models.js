// The models: every bundled model (models/), and the models the dataset's definitions are
// tagged with that fib does not bundle (onboarded from a config).
"use strict";

const { el } = Fib;

// "TP 1,2" or "TP 8 / EP 8": the default serving setup the definitions are counted at.
function servingText(serving) {
  const ep = serving.ep.some((e) => e > 1) ? ` / EP ${serving.ep.join(",")}` : "";
  return `TP ${serving.tp.join(",")}${ep}`;
}

function modelCard(m) {
  const facts = m.error
    ? el("div", { class: "meta" }, el("span", { class: "badge bad" }, "config error"))
    : [
        el("div", { class: "meta" }, `${m.family} · ${m.layers} layers · ${m.parameters_text} parameters`),
        el("div", { class: "meta" }, `${m.definitions} definitions at ${servingText(m.serving)}`),
      ];
  const held =
    m.in_dataset > 0
      ? el("span", { class: "badge good", title: `dataset definitions tagged model:${m.id}` }, `onboarded: ${m.in_dataset} definitions`)
      : el("span", { class: "badge muted" }, "not onboarded");
  return el(
    "a",
    { class: "card", href: `model.html?id=${encodeURIComponent(m.id)}`, "data-model": m.id },
    el("div", { class: "title" }, m.name),
    el("div", { class: "meta" }, el("code", {}, m.id)),
    facts,
    el("div", { style: "margin-top:6px" }, held),
  );
}

Fib.run("models.html", async (content) => {
  const data = await Fib.api("/api/models");
  const onboarded = data.onboarded.length
    ? el(
        "div",
        { class: "cards" },
        data.onboarded.map((m) =>
          el(
            "a",
            { class: "card", href: `model.html?id=${encodeURIComponent(m.id)}`, "data-model": m.id },
            el("div", { class: "title" }, m.name),
            el("div", { class: "meta" }, `${m.in_dataset} definitions tagged model:${m.id}`),
          ),
        ),
      )
    : el("p", { class: "muted" }, "None: every model: tag of the dataset is a bundled model.");
  content.replaceChildren(
    el("h1", {}, "Models"),
    el(
      "p",
      { class: "subtitle" },
      "Each model's module tree comes from fib onboard's module graph at its default serving setup; " +
        "every module links to the kernel definitions it runs.",
    ),
    Fib.panel(
      "Bundled models",
      `${data.bundled.length}`,
      el("div", { class: "cards", id: "bundled-models" }, data.bundled.map(modelCard)),
    ),
    Fib.panel("Other onboarded models", "from the dataset's model: tags", onboarded),
  );
});
