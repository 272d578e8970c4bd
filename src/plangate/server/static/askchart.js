// A copilot turn's result as a chart: a bar chart (labels such as regions) or a line chart (periods, years),
// drawn with uPlot (vendored under vendor/uplot/, MIT). Which kind, and which columns, the server says in
// the turn's `chart` ({kind, x, y}); this module only draws it. Not for: deciding whether a result is a series.

import uPlot from "./vendor/uplot/uPlot.esm.js";

const COLORS = ["#2456c8", "#d9730d", "#1a7f37", "#8250df"];
const HEIGHT = 260;

function label(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "number" ? value.toLocaleString() : String(value);
}

function yRange(min, max) {
  const low = Math.min(0, min ?? 0);
  const high = Math.max(0, max ?? 0);
  const pad = (high - low || 1) * 0.05;
  return [low < 0 ? low - pad : 0, high + pad];
}

/**
 * Draw `result` ({columns, rows}) in `container` as `chart` says; returns the uPlot instance, or null when the
 * columns it names are not in the result. The container gets data-kind="bar|line" and the series' names.
 */
export function drawChart(container, result, chart) {
  const columns = result.columns || [];
  const rows = result.rows || [];
  const xi = columns.indexOf(chart.x);
  const ys = (chart.y || []).map((name) => columns.indexOf(name)).filter((index) => index >= 0);
  if (xi < 0 || !ys.length || rows.length < 2) return null;
  const bar = chart.kind === "bar";
  // Two bar series side by side at most; more would hide each other.
  const shown = bar ? ys.slice(0, 2) : ys;
  const labels = rows.map((row) => row[xi]);
  const numericX = labels.every((value) => typeof value === "number");
  const xs = numericX ? labels : labels.map((_, index) => index);
  const data = [xs, ...shown.map((j) => rows.map((row) => (typeof row[j] === "number" ? row[j] : null)))];
  const xText = (value) => (numericX ? String(value) : label(labels[value]));
  const series = shown.map((j, k) => ({
    label: String(columns[j]),
    stroke: COLORS[k % COLORS.length],
    fill: bar ? `${COLORS[k % COLORS.length]}cc` : undefined,
    width: bar ? 1 : 2,
    paths: bar ? uPlot.paths.bars({ size: [shown.length > 1 ? 0.4 : 0.6, 80], align: shown.length > 1 ? (k ? 1 : -1) : 0 }) : undefined,
    points: { show: !bar },
    value: (u, value) => label(value),
  }));
  const width = Math.max(320, Math.floor(container.clientWidth || container.parentElement?.clientWidth || 640));
  const options = {
    width,
    height: HEIGHT,
    scales: {
      x: { time: false, range: numericX ? undefined : [-0.5, xs.length - 0.5] },
      // bars stand on zero; a line may start near its first value
      y: bar ? { range: (u, min, max) => yRange(min, max) } : {},
    },
    axes: [
      {
        splits: numericX ? undefined : () => xs,
        values: (u, splits) => splits.map((value) => (numericX || Number.isInteger(value) ? xText(value) : "")),
        size: 48,
      },
      { values: (u, splits) => splits.map(label), size: (u, values) => 14 + 8 * Math.max(4, ...(values || []).map((v) => String(v).length)) },
    ],
    series: [{ label: chart.x, value: (u, value) => (value === null || value === undefined ? "" : xText(value)) }, ...series],
    legend: { show: true },
    cursor: { drag: { x: false, y: false } },
  };
  container.dataset.kind = bar ? "bar" : "line";
  container.dataset.series = series.map((item) => item.label).join(",");
  container.setAttribute("role", "img");
  container.setAttribute(
    "aria-label",
    `${bar ? "Bar" : "Line"} chart of ${series.map((item) => item.label).join(" and ")} by ${chart.x}`,
  );
  return new uPlot(options, data, container);
}
