// Shared by every page: the header, API calls, element building and number formatting.
"use strict";

const Fib = (() => {
  const pages = [
    ["index.html", "Leaderboard"],
    ["kernels.html", "Kernels"],
    ["models.html", "Models"],
    ["trace.html", "Trace viewer"],
    ["task.html", "Tasks"],
  ];

  // el("a", {href: "x", class: "y"}, "text", child, ...): children may be strings, nodes,
  // arrays, null or undefined (skipped).
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function header(active) {
    const nav = el(
      "nav",
      {},
      pages.map(([href, label]) => el("a", { href, class: href === active ? "active" : null }, label)),
    );
    const bar = el(
      "header",
      { class: "topbar" },
      el("div", { class: "inner" }, el("a", { class: "brand", href: "index.html" }, "fib ", el("span", {}, "bench")), nav),
    );
    document.body.prepend(bar);
    document.body.append(
      el("footer", {}, "fib serve · numbers from fib's report module · ", el("a", { href: "/openapi.json" }, "API")),
    );
  }

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(path) {
    const response = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) {
      const detail = body && (body.error || body.detail);
      throw new ApiError(response.status, detail ? String(detail) : `HTTP ${response.status}`);
    }
    return body;
  }

  // Replaces the page's content with what went wrong (a 401 says how to log in).
  function showError(container, error) {
    const message =
      error.status === 401
        ? [
            "Not logged in. Open ",
            el("code", {}, "/login?token=YOUR_TOKEN"),
            " once (fib serve prints the token, or see the state folder's token file).",
          ]
        : [String(error.message || error)];
    container.replaceChildren(el("div", { class: "message error" }, message));
  }

  // Runs a page's async render into #content, showing any failure there. The body's
  // data-state says when the page is done ("ready" or "error"), for scripts that drive it.
  function run(active, render) {
    header(active);
    const content = document.getElementById("content");
    content.append(el("p", { class: "muted" }, "Loading…"));
    render(content)
      .then(() => {
        document.body.dataset.state = "ready";
      })
      .catch((error) => {
        showError(content, error);
        document.body.dataset.state = "error";
      });
  }

  // [a, b, c] -> [a, sep, b, sep, c]
  const joined = (nodes, sep) => nodes.flatMap((n, i) => (i ? [sep, n] : [n]));

  const param = (name) => new URLSearchParams(window.location.search).get(name);

  const fixed = (v, digits = 2) => (v === null || v === undefined || Number.isNaN(v) ? "–" : Number(v).toFixed(digits));
  const percent = (v) => `${fixed(v * 100)}%`;
  const speedup = (v) => `${fixed(v)}×`;
  const latency = (ms) => {
    if (ms === null || ms === undefined || ms <= 0) return "–";
    if (ms < 0.01) return `${(ms * 1000).toFixed(2)} µs`;
    return `${ms.toFixed(3)} ms`;
  };

  // A table: columns are [header, cell(row) -> node|string, "num"?].
  function table(columns, rows, attrs) {
    const head = el(
      "tr",
      {},
      columns.map(([title, , kind]) => el("th", { class: kind === "num" ? "num" : null }, title)),
    );
    const body = rows.map((row) =>
      el(
        "tr",
        {},
        columns.map(([, cell, kind]) => el("td", { class: kind === "num" ? "num" : null }, cell(row))),
      ),
    );
    return el("div", { class: "table-wrap" }, el("table", attrs || {}, el("thead", {}, head), el("tbody", {}, body)));
  }

  // A number cell that carries its exact value (the browser tests compare it with the CLI's).
  const numberCell = (value, text, field) => el("span", { "data-field": field, "data-value": value }, text);

  function statusBadge(status) {
    if (!status) return el("span", { class: "badge muted" }, "no evaluation");
    const kind = status === "PASSED" ? "good" : status === "TIMEOUT" ? "warn" : "bad";
    return el("span", { class: `badge ${kind}` }, status);
  }

  const kernelLink = (name) => el("a", { href: `kernel.html?name=${encodeURIComponent(name)}` }, name);
  const modelLink = (id, label) => el("a", { href: `model.html?id=${encodeURIComponent(id)}` }, label || id);
  // Traces are named by a content hash (stable across restarts), never by position.
  const traceLink = (definition, id, label) =>
    el("a", { href: `trace.html?definition=${encodeURIComponent(definition)}&id=${encodeURIComponent(id)}` }, label);

  function panel(title, hint, ...children) {
    return el("section", { class: "panel" }, el("h2", {}, title, hint ? el("span", { class: "hint" }, hint) : null), children);
  }

  function stat(label, value, field) {
    return el(
      "div",
      { class: "stat" },
      el("div", { class: "label" }, label),
      el("div", { class: "value", "data-field": field }, value),
    );
  }

  // Highlighted source (highlight.js from Debian's libjs-highlight.js, when it loaded).
  function code(text, language) {
    const node = el("code", { class: language ? `language-${language}` : null }, text);
    if (window.hljs) {
      if (typeof window.hljs.highlightElement === "function") window.hljs.highlightElement(node);
      else window.hljs.highlightBlock(node);
    }
    return el("pre", { class: "code" }, node);
  }

  // Colors for chart series, distinct on white.
  const palette = ["#3a5bd9", "#e0662f", "#1d8a4e", "#a63fc2", "#c2352b", "#0f8ea8", "#b08a00", "#5d6779", "#d2468c", "#2f6f3e"];

  return {
    el,
    append,
    api,
    run,
    param,
    joined,
    fixed,
    percent,
    speedup,
    latency,
    table,
    numberCell,
    statusBadge,
    kernelLink,
    modelLink,
    traceLink,
    panel,
    stat,
    code,
    palette,
    showError,
  };
})();
