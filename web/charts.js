// fast_p curves with Chart.js (Debian's libjs-chart.js): x is the speedup threshold p, y the share
// of compared workloads where the solution passed and was at least p times as fast as the basis.
"use strict";

const FibCharts = (() => {
  // The x range worth showing: up to a little past the largest p any curve still has a
  // workload at (pMax, the report grid's end, is the whole dataset's largest ratio), and at
  // least 0..1.
  function xMax(pMax, series) {
    let last = 0;
    for (const s of series) {
      s.steps.fast_p.forEach((v, k) => {
        if (v > 0 && s.steps.p[k] > last) last = s.steps.p[k];
      });
    }
    return Math.min(pMax || 1, Math.max(1, Math.ceil(last * 1.1 * 10) / 10));
  }

  // The palette's colours, then hues spread by the golden angle, so no two series share one.
  function color(i) {
    return i < Fib.palette.length ? Fib.palette[i] : `hsl(${Math.round((i * 137.508) % 360)}, 65%, 42%)`;
  }

  // series: [{label, steps: {p, fast_p}}], each curve as the points where it takes a new level
  // (the site API's steps), drawn as a stepped line; the p axis starts logarithmic unless `log`
  // is false. Returns the Chart (tests read its data).
  // The chart's own legend is off (a long one squeezed the plot to a few pixels); legend()
  // makes a scrolling list of the series under it, each one shown or hidden by a click. Only the
  // first `shownAtFirst` series are drawn until the user picks others.
  function fastP(canvas, pMax, series, log = true, shownAtFirst = Infinity) {
    if (!window.Chart) {
      const why = "Chart.js is not installed on the server (Debian package libjs-chart.js).";
      canvas.replaceWith(Fib.el("p", { class: "message" }, why));
      return null;
    }
    const datasets = series.map((s, i) => ({
      label: s.label,
      data: s.steps.p.map((p, k) => ({ x: p, y: s.steps.fast_p[k] })),
      stepped: "before",
      borderColor: color(i),
      backgroundColor: color(i),
      hidden: i >= shownAtFirst,
      borderWidth: 2,
      pointRadius: 0,
      tension: 0,
    }));
    const chart = new window.Chart(canvas.getContext("2d"), {
      type: "line",
      data: { datasets },
      options: {
        animation: false,
        maintainAspectRatio: false,
        parsing: false,
        interaction: { mode: "nearest", axis: "x", intersect: false },
        scales: {
          x: {
            type: "linear",
            min: 0,
            max: xMax(pMax, series),
            title: { display: true, text: "p (speedup over the basis)" },
          },
          y: { min: 0, max: 100, title: { display: true, text: "fast_p (%)" } },
        },
        plugins: {
          legend: { display: false },
          tooltip: {
            callbacks: {
              title: (items) => (items.length ? `p = ${items[0].parsed.x.toFixed(2)}` : ""),
              label: (item) => `${item.dataset.label}: ${item.parsed.y.toFixed(1)}%`,
            },
          },
        },
      },
    });
    setLogScale(chart, log);
    return chart;
  }

  // Switches the p axis between linear (from 0) and logarithmic (from 0.1, where the
  // differences around p = 1 show even when one solution is many times faster).
  function setLogScale(chart, log) {
    const x = chart.options.scales.x;
    x.type = log ? "logarithmic" : "linear";
    x.min = log ? 0.1 : 0;
    x.ticks = log ? { autoSkip: false, callback: logTick } : {};
    chart.update();
  }

  // On the log axis, label only 1-2-5 steps (the others crowd each other).
  const logSteps = [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];
  function logTick(value) {
    return logSteps.some((s) => Math.abs(s - value) < 1e-9 * s) ? `${value}×` : "";
  }

  // Linear/log buttons for a chart made later (getChart() returns it, or null); onPick(log)
  // hears each choice.
  function scaleToggle(getChart, onPick) {
    const buttons = [];
    const pick = (log) => {
      const chart = getChart();
      if (chart) setLogScale(chart, log);
      buttons.forEach((b, i) => b.classList.toggle("active", (i === 1) === log));
      if (onPick) onPick(log);
    };
    buttons.push(Fib.el("button", { type: "button", class: "toggle", onclick: () => pick(false) }, "linear p"));
    buttons.push(Fib.el("button", { type: "button", class: "toggle active", onclick: () => pick(true) }, "log p"));
    return Fib.el("div", { class: "toolbar scale-toggle" }, buttons);
  }

  // A list of the chart's series (colour, label, a checkbox that shows or hides it), scrolling
  // when long, with buttons to show all or none.
  function legend(chart, id) {
    if (!chart) return null;
    const boxes = chart.data.datasets.map((d, i) => {
      const box = el("input", { type: "checkbox", checked: chart.isDatasetVisible(i) });
      box.addEventListener("change", () => {
        chart.setDatasetVisibility(i, box.checked);
        chart.update();
      });
      return box;
    });
    const setAll = (shown) => {
      boxes.forEach((b, i) => {
        b.checked = shown;
        chart.setDatasetVisibility(i, shown);
      });
      chart.update();
    };
    const items = chart.data.datasets.map((d, i) =>
      el("label", { class: "legend-item" }, boxes[i], el("span", { class: "swatch", style: `background:${d.borderColor}` }), d.label),
    );
    const tools =
      items.length > 1
        ? el(
            "div",
            { class: "legend-tools" },
            el("button", { type: "button", class: "toggle", onclick: () => setAll(true) }, "show all"),
            el("button", { type: "button", class: "toggle", onclick: () => setAll(false) }, "hide all"),
          )
        : null;
    return el("div", { class: "chart-legend", id }, tools, el("div", { class: "legend-items" }, items));
  }

  const el = (...args) => Fib.el(...args);

  return { fastP, setLogScale, scaleToggle, legend };
})();
