// Charts drawn as SVG by this file (no chart library): bars per minute, a rate line, and
// horizontal utilization bars. Numbers go in as text nodes and attributes only.

import { stateClasses } from "./dom.js";
import { timeOfDay } from "./time.js";

const SVG = "http://www.w3.org/2000/svg";

export function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function minuteLabel(iso) {
  return timeOfDay(iso).slice(0, 5);
}

// Which minutes the axis names: about six, however long the window (an hour: every 10th).
function labelled(index, count) {
  return index % Math.max(1, Math.ceil(count / 6)) === 0;
}

// An empty chart over a minute axis: its title, three grid lines labelled by ``label``
// (0, half, full), and where the bars go.
function frame(points, { width, height, title }, label) {
  const pad = { left: 36, right: 8, top: 12, bottom: 22 };
  const innerHeight = height - pad.top - pad.bottom;
  const step = (width - pad.left - pad.right) / Math.max(1, points.length);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "aria-label": title });
  chart.append(svg("title", {}, title));
  for (const fraction of [0, 0.5, 1]) {
    const y = pad.top + innerHeight * (1 - fraction);
    chart.append(svg("line", { x1: pad.left, x2: width - pad.right, y1: y, y2: y, class: "grid" }));
    chart.append(svg("text", { x: pad.left - 4, y: y + 4, class: "axis", "text-anchor": "end" }, label(fraction)));
  }
  return { chart, pad, innerHeight, step };
}

// Stacked bars per minute: one band per series, bottom first.
export function stackedBars(points, series, { width = 720, height = 180, title = "" } = {}) {
  const totals = points.map((point) => series.reduce((sum, one) => sum + (point[one.key] || 0), 0));
  const top = Math.max(1, ...totals);
  const { chart, pad, innerHeight, step } = frame(points, { width, height, title }, (fraction) => Math.round(top * fraction));
  points.forEach((point, index) => {
    let base = pad.top + innerHeight;
    const x = pad.left + index * step;
    for (const one of series) {
      const value = point[one.key] || 0;
      if (!value) continue;
      const barHeight = (value / top) * innerHeight;
      base -= barHeight;
      chart.append(
        svg(
          "rect",
          { x: x + 0.5, y: base, width: Math.max(1, step - 1), height: barHeight, class: `bar ${one.key}` },
          svg("title", {}, `${minuteLabel(point.minute)} ${one.key}: ${value}`),
        ),
      );
    }
    if (labelled(index, points.length)) {
      chart.append(svg("text", { x, y: height - 6, class: "axis" }, minuteLabel(point.minute)));
    }
  });
  return chart;
}

// The failure rate per minute as a line — failed / (succeeded + failed), as /v1/stats counts
// it; minutes where nothing succeeded or failed are gaps.
export function rateLine(points, { width = 720, height = 120, title = "" } = {}) {
  const { chart, pad, innerHeight, step } = frame(points, { width, height, title }, (fraction) => `${fraction * 100}%`);
  const segments = [[]];
  points.forEach((point, index) => {
    const ended = (point.succeeded || 0) + (point.failed || 0);
    const x = pad.left + index * step + step / 2;
    if (labelled(index, points.length)) chart.append(svg("text", { x: x - step / 2, y: height - 6, class: "axis" }, minuteLabel(point.minute)));
    if (!ended) {
      segments.push([]);
      return;
    }
    const y = pad.top + innerHeight * (1 - (point.failed || 0) / ended);
    segments[segments.length - 1].push(`${x.toFixed(1)},${y.toFixed(1)}`);
    const tip = `${minuteLabel(point.minute)}: ${point.failed || 0} of ${ended} failed`;
    chart.append(svg("circle", { cx: x, cy: y, r: 2, class: "rate-point" }, svg("title", {}, tip)));
  });
  const d = segments.filter((one) => one.length).map((one) => `M${one.join("L")}`).join(" ");
  if (d) chart.append(svg("path", { d, class: "rate" }));
  return chart;
}

// One horizontal bar per resource: used out of capacity (or used alone when there is none).
export function utilization(used, capacity, { width = 360 } = {}) {
  const names = Object.keys(used || {});
  const rowHeight = 26;
  const height = Math.max(1, names.length) * rowHeight + 4;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart utilization", role: "img", "aria-label": "utilization" });
  const barLeft = 90;
  const barWidth = width - barLeft - 90;
  names.forEach((name, index) => {
    const y = index * rowHeight + 4;
    const have = capacity ? capacity[name] || 0 : 0;
    const share = have ? Math.min(1, used[name] / have) : 0;
    chart.append(svg("text", { x: 0, y: y + 14, class: "axis" }, name));
    chart.append(svg("rect", { x: barLeft, y, width: barWidth, height: 18, class: "track" }));
    chart.append(svg("rect", { x: barLeft, y, width: barWidth * share, height: 18, class: "fill" }));
    const text = capacity ? `${round(used[name])} / ${round(have)}` : `${round(used[name])} in use`;
    chart.append(svg("text", { x: barLeft + barWidth + 6, y: y + 14, class: "axis" }, text));
  });
  return chart;
}

function round(value) {
  return Math.round((value || 0) * 100) / 100;
}

// A run's life on one time axis: the wait before its first attempt, then each attempt from
// start to end (or to now while it runs), coloured by how it ended.
export function runTimeline(run, now = Date.now(), { width = 720 } = {}) {
  const time = (iso) => (iso ? new Date(iso).getTime() : null);
  const start = time(run.created_at);
  const end = Math.max(start + 1000, time(run.finished_at) || now);
  const firstStart = Math.min(...run.attempts.map((attempt) => time(attempt.started_at)));
  const waited = Number.isFinite(firstStart) ? firstStart : time(run.finished_at) || now;
  const rows = [{ label: "waiting", from: start, to: waited, kind: "queued" }];
  for (const attempt of run.attempts) {
    rows.push({ label: `attempt ${attempt.number}${attempt.rank ? ` rank ${attempt.rank}` : ""}`, from: time(attempt.started_at), to: time(attempt.finished_at) || now, kind: attempt.state });
  }
  const left = 110;
  const rowHeight = 22;
  const height = rows.length * rowHeight + 24;
  const scale = (at) => left + ((at - start) / (end - start)) * (width - left - 10);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart timeline", role: "img", "aria-label": "run timeline" });
  rows.forEach((one, index) => {
    const y = index * rowHeight + 4;
    chart.append(svg("text", { x: 0, y: y + 13, class: "axis" }, one.label));
    const x = scale(one.from);
    const span = Math.max(2, scale(one.to) - x);
    const seconds = Math.max(0, Math.round((one.to - one.from) / 1000));
    chart.append(svg("rect", { x, y, width: span, height: 16, rx: 3, class: `span ${stateClasses(one.kind)}` }, svg("title", {}, `${one.label}: ${one.kind}, ${seconds}s`)));
  });
  const axisY = height - 6;
  chart.append(svg("text", { x: left, y: axisY, class: "axis" }, timeOfDay(start)));
  chart.append(svg("text", { x: width - 10, y: axisY, class: "axis", "text-anchor": "end" }, timeOfDay(end)));
  return chart;
}
