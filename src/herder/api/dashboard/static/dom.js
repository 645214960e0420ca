// Building the page. Every piece of data goes in as text (textContent, attributes set one by
// one): nothing from the API is ever parsed as HTML, so a job named "<script>" is just a name.

import { TONE_OF_STATE } from "./states.js";
import { dateTime } from "./time.js";

export function h(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function link(href, ...children) {
  return h("a", { href }, ...children);
}

// A state's classes: its name, and its tone (from the server's states.js), which the
// stylesheet colours; a name the page does not know reads neutral.
export function stateClasses(state) {
  const tone = Object.hasOwn(TONE_OF_STATE, state) ? TONE_OF_STATE[state] : "neutral";
  return `state-${state} tone-${tone}`;
}

export function badge(state, extra = "") {
  return h("span", { class: `state ${stateClasses(state)}`, "data-state": state }, state, extra);
}

// ``empty``: what to say when there is no row (text, or nodes such as a command to run).
export function table(headings, rows, empty = "Nothing here.") {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h(
    "table",
    {},
    h("thead", {}, h("tr", {}, headings.map((heading) => h("th", {}, heading)))),
    h("tbody", {}, rows),
  );
}

// Named facts as a list, e.g. a run's; one with nothing to say (empty, an empty list) is left out.
export function facts(pairs) {
  const said = (value) => value !== "" && value !== null && value !== undefined && !(Array.isArray(value) && !value.length);
  return h("dl", { class: "facts" }, pairs.filter(([, value]) => said(value)).map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]));
}

export function row(cells, attributes = {}) {
  return h("tr", attributes, cells.map((cell) => h("td", {}, cell)));
}

// A moment as every view shows one (time.js): in the browser's zone, or in ``zone``.
export function when(iso, zone = "") {
  if (!iso) return "";
  return h("time", { datetime: iso, title: iso }, dateTime(iso, zone));
}

export function ago(iso, now = Date.now()) {
  if (!iso) return "";
  return duration((now - new Date(iso).getTime()) / 1000) + " ago";
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function between(start, end) {
  if (!start) return "";
  const stop = end ? new Date(end).getTime() : Date.now();
  return duration((stop - new Date(start).getTime()) / 1000);
}

export function resources(capacity) {
  if (!capacity) return "";
  const parts = [];
  if (capacity.cpu !== undefined) parts.push(`${capacity.cpu} cpu`);
  if (capacity.memory_mb !== undefined) parts.push(`${capacity.memory_mb} MB`);
  if (capacity.gpus) parts.push(`${capacity.gpus} gpu`);
  return parts.join(" · ");
}

export function labels(map) {
  return Object.entries(map || {}).map(([key, value]) => h("span", { class: "label" }, `${key}=${value}`));
}

// A button that runs an action, shows the API's problem detail if it fails (else what the
// action returned, or that it is done) and then refreshes the view.
export function action(text, perform, { confirmText, ctx, danger = false } = {}) {
  return h(
    "button",
    {
      type: "button",
      class: danger ? "danger" : "",
      onclick: async (event) => {
        if (confirmText && !window.confirm(confirmText)) return;
        const button = event.currentTarget;
        button.disabled = true;
        try {
          const said = await perform();
          ctx.notice(typeof said === "string" ? said : `${text}: done`);
        } catch (error) {
          ctx.fail(error);
        } finally {
          button.disabled = false;
          ctx.refresh();
        }
      },
    },
    text,
  );
}

// "Newer" and "Older" buttons, when there is more than one page.
export function pager(page, cursors, go) {
  if (cursors.length === 0 && !page.next_cursor) return "";
  return h(
    "div",
    { class: "pager" },
    h("button", { type: "button", disabled: cursors.length === 0, onclick: () => go(cursors.slice(0, -1)) }, "← Newer"),
    h(
      "button",
      { type: "button", disabled: !page.next_cursor, onclick: () => go([...cursors, page.next_cursor]) },
      "Older →",
    ),
  );
}

// Replaces a node's children with these (nested arrays and empty values allowed, as in h).
export function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
}
