// fast_p curves with Chart.js (Debian's libjs-chart.js): x is the speedup threshold p, y the share
// of compared workloads where the solution passed and was at least p times as fast as the basis.
"use strict";

const FibCharts = (() => {
  // The x range worth showing: up to a little past the largest p any curve still has a
  // workload at (the grid spans the whole dataset's largest ratio), and at least 0..1.
  function xMax(grid, series) {
    let last = 0;
    for (const s of series) {
      s.curve.forEach((v, k) => {
        if (v > 0 && grid[k] > last) last = grid[k];
      });
    }
    const end = grid.length ? grid[grid.length - 1] : 1;
    return Math.min(end, Math.max(1, Math.ceil(last * 1.1 * 10) / 10));
  }

  // series: [{label, curve}] sampled on `grid`; the p axis starts logarithmic unless `log` is
  // false. Returns the Chart (tests read its data).
  function fastP(canvas, grid, series, log = true) {
    if (!window.Chart) {
      const why = "Chart.js is not installed on the server (Debian package libjs-chart.js).";
      canvas.replaceWith(Fib.el("p", { class: "message" }, why));
      return null;
    }
    const datasets = series.map((s, i) => ({
      label: s.label,
      data: grid.map((p, k) => ({ x: p, y: s.curve[k] })),
      borderColor: Fib.palette[i % Fib.palette.length],
      backgroundColor: Fib.palette[i % Fib.palette.length],
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
            max: xMax(grid, series),
            title: { display: true, text: "p (speedup over the basis)" },
          },
          y: { min: 0, max: 100, title: { display: true, text: "fast_p (%)" } },
        },
        plugins: {
          legend: { position: "bottom" },
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

  return { fastP, setLogScale, scaleToggle };
})();
