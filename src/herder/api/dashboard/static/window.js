// The time window a view looks back over (the overview's stats and failures, the runs
// list), chosen from a few and kept in the URL hash (`?window=6h`), so a reload keeps it.

import { h } from "./dom.js";

export const WINDOWS = [
  { key: "1h", minutes: 60, label: "1 h" },
  { key: "6h", minutes: 360, label: "6 h" },
  { key: "24h", minutes: 1440, label: "24 h" },
  { key: "7d", minutes: 10080, label: "7 d" },
];

// The window the hash's parameters name, among ``offered``; else ``fallback``.
export function chosenWindow(params, offered = WINDOWS, fallback = offered[0]) {
  return offered.find((one) => one.key === params.get("window")) || fallback;
}

// Its start, as the API takes it.
export function windowStart(window, now = Date.now()) {
  return new Date(now - window.minutes * 60_000).toISOString();
}

// A picker of the windows offered (and "any time" when ``anyText`` is given); choosing one
// calls ``choose(key)`` ("" for any time), if given (else a form reads its value).
export function windowPicker(current, choose, { offered = WINDOWS, anyText = "" } = {}) {
  return h(
    "select",
    { name: "window", "aria-label": "Time window", onchange: choose && ((event) => choose(event.currentTarget.value)) },
    anyText ? h("option", { value: "" }, anyText) : "",
    offered.map((one) => h("option", { value: one.key, selected: current && current.key === one.key }, `last ${one.label}`)),
  );
}
