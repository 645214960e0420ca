// A workflow's DAG as a layered drawing (Sugiyama's method, kept small): a task's layer is its
// longest path from a root, as `herder workflow show` lays it out; an edge that skips layers
// passes each one it skips through a waypoint of its own, so no edge runs behind a box; tasks
// within a layer are ordered to cross fewer edges; each box has its state's own colour
// (COLOUR_OF_TASK_STATE, from the server) and a legend names the states drawn. A workflow's
// definition has no states: its boxes say what each task runs, in no state's colour; the
// editor marks the tasks a cycle passes (``marked``) and the edges between them.

import { svg } from "./charts.js";
import { badge, h, stateClasses } from "./dom.js";
import { COLOUR_OF_TASK_STATE, RUN_STATES_WORST_FIRST } from "./states.js";
import { runPath } from "./views/common.js";

const BOX = { width: 150, height: 40, gapX: 60, gapY: 16 };
const WAYPOINT = 8; // the height an edge's pass through a layer takes in that layer
const MARGIN = 10;
const ORDERING_SWEEPS = 4; // down and up, each: enough for the graphs a workflow has

let drawn = 0; // each drawing's marker gets its own id (two graphs may share a page)

// Tasks by name with their instances (a mapped task has several).
function byTask(tasks) {
  const grouped = new Map();
  for (const instance of tasks) {
    if (!grouped.has(instance.task)) grouped.set(instance.task, { name: instance.task, depends_on: instance.depends_on, runs: instance.runs, instances: [] });
    grouped.get(instance.task).instances.push(instance);
  }
  return [...grouped.values()];
}

// Longest path from a root, by Kahn's order; tasks on a cycle (refused by the API) go last.
function layers(tasks) {
  const names = new Set(tasks.map((task) => task.name));
  const depth = new Map(tasks.map((task) => [task.name, 0]));
  const unmet = new Map(tasks.map((task) => [task.name, task.depends_on.filter((up) => names.has(up)).length]));
  const children = new Map(tasks.map((task) => [task.name, []]));
  for (const task of tasks) for (const up of task.depends_on) if (names.has(up)) children.get(up).push(task.name);
  const ready = tasks.filter((task) => unmet.get(task.name) === 0).map((task) => task.name);
  const placed = new Set();
  while (ready.length) {
    const name = ready.shift();
    placed.add(name);
    for (const child of children.get(name)) {
      depth.set(child, Math.max(depth.get(child), depth.get(name) + 1));
      unmet.set(child, unmet.get(child) - 1);
      if (unmet.get(child) === 0) ready.push(child);
    }
  }
  const deepest = Math.max(0, ...depth.values());
  const result = [];
  for (const task of tasks) {
    const level = placed.has(task.name) ? depth.get(task.name) : deepest + 1;
    (result[level] ||= []).push(task);
  }
  return result.filter(Boolean);
}

// The state a task's box shows: its worst instance's; null for a definition's task.
function taskState(task) {
  const states = task.instances.map((instance) => instance.state).filter(Boolean);
  if (!states.length) return null;
  return RUN_STATES_WORST_FIRST.find((state) => states.includes(state)) || states[0];
}

export function colourOf(state) {
  return COLOUR_OF_TASK_STATE[state] || COLOUR_OF_TASK_STATE.pending; // a newer server's state
}

// A task state's badge in the colour its box has in the graph (not only its tone's).
export function taskBadge(state) {
  const shown = badge(state);
  shown.style.backgroundColor = colourOf(state);
  return shown;
}

// The layers as rows of nodes: each task's box, and a waypoint for every edge in every layer
// it skips. Each edge is the list of nodes it passes, from its upstream task to its task.
function routed(columns) {
  const layerOf = new Map();
  columns.forEach((column, index) => column.forEach((task) => layerOf.set(task.name, index)));
  const rows = columns.map((column) => column.map((task) => ({ task })));
  const nodeOf = new Map(rows.flat().map((node) => [node.task.name, node]));
  const edges = [];
  for (const task of columns.flat()) {
    for (const up of task.depends_on) {
      if (!nodeOf.has(up)) continue;
      const path = [nodeOf.get(up)];
      for (let layer = layerOf.get(up) + 1; layer < layerOf.get(task.name); layer++) {
        const waypoint = { waypoint: true };
        rows[layer].push(waypoint);
        path.push(waypoint);
      }
      path.push(nodeOf.get(task.name));
      edges.push({ from: up, to: task.name, path });
    }
  }
  return { rows, edges };
}

// Barycentre ordering: each row sorted by the mean position of its neighbours in the row
// before it (sweeping down) or after it (sweeping up); a node without any keeps its place.
function order(rows, edges) {
  const above = new Map();
  const below = new Map();
  for (const { path } of edges) {
    for (let i = 1; i < path.length; i++) {
      if (!above.has(path[i])) above.set(path[i], []);
      if (!below.has(path[i - 1])) below.set(path[i - 1], []);
      above.get(path[i]).push(path[i - 1]);
      below.get(path[i - 1]).push(path[i]);
    }
  }
  const sortBy = (row, neighbours, position) => {
    const keyed = row.map((node, index) => {
      const near = (neighbours.get(node) || []).filter((other) => position.has(other));
      const mean = near.length ? near.reduce((sum, other) => sum + position.get(other), 0) / near.length : index;
      return { node, key: mean, index };
    });
    keyed.sort((a, b) => a.key - b.key || a.index - b.index);
    return keyed.map(({ node }) => node);
  };
  const positions = (row) => new Map(row.map((node, index) => [node, index]));
  for (let sweep = 0; sweep < ORDERING_SWEEPS; sweep++) {
    for (let layer = 1; layer < rows.length; layer++) rows[layer] = sortBy(rows[layer], above, positions(rows[layer - 1]));
    for (let layer = rows.length - 2; layer >= 0; layer--) rows[layer] = sortBy(rows[layer], below, positions(rows[layer + 1]));
  }
}

// Each node's box: its layer's column, stacked top down, every row centred on the tallest.
function place(rows) {
  const heightOf = (node) => (node.waypoint ? WAYPOINT : BOX.height);
  const rowHeight = (row) => row.reduce((sum, node) => sum + heightOf(node), 0) + BOX.gapY * Math.max(0, row.length - 1);
  const tallest = Math.max(BOX.height, ...rows.map(rowHeight));
  rows.forEach((row, layer) => {
    let y = MARGIN + (tallest - rowHeight(row)) / 2;
    for (const node of row) {
      Object.assign(node, { x: MARGIN + layer * (BOX.width + BOX.gapX), y, height: heightOf(node) });
      y += node.height + BOX.gapY;
    }
  });
  return { width: 2 * MARGIN + rows.length * (BOX.width + BOX.gapX) - BOX.gapX, height: 2 * MARGIN + tallest };
}

// An edge's path: a curve across each gap between layers, a straight line through each layer
// it skips (at its waypoint, where no box is), into the left side of its task's box.
function edgePath(path) {
  const middle = (node) => node.y + node.height / 2;
  const first = path[0];
  let d = `M${first.x + BOX.width},${middle(first)}`;
  for (let i = 1; i < path.length; i++) {
    const [from, to] = [path[i - 1], path[i]];
    const [x1, y1, x2, y2] = [from.x + BOX.width, middle(from), to.x, middle(to)];
    const bend = (x2 - x1) / 2;
    d += ` C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`;
    if (to.waypoint) d += ` L${to.x + BOX.width},${y2}`;
  }
  return d;
}

function box(task, node, marked) {
  const state = taskState(task);
  const count = task.instances.length > 1 ? ` ×${task.instances.length}` : "";
  const only = task.instances.length === 1 ? task.instances[0] : null;
  const second = state || task.runs || "";
  const group = svg(
    "g",
    {
      class: `${state ? `task ${stateClasses(state)}` : "task definition"}${marked.has(task.name) ? " marked" : ""}`,
      "data-task": task.name,
      ...(state ? { "data-state": state } : {}),
      transform: `translate(${node.x},${node.y})`,
    },
    svg("title", {}, `${task.name}: ${second}`),
    svg("rect", { width: BOX.width, height: BOX.height, rx: 6, ...(state ? { fill: colourOf(state) } : {}) }),
    svg("text", { x: 8, y: 16, class: "task-name" }, `${task.name.slice(0, 18)}${count}`),
    svg("text", { x: 8, y: 32, class: "task-state" }, second.slice(0, 22)),
  );
  // A task with one run opens it; a mapped one's instances are in the table below.
  return only && only.run_id ? svg("a", { href: runPath(only.run_id) }, group) : group;
}

// The states drawn, worst first, each beside its colour.
function legend(states) {
  return h(
    "ul",
    { class: "dag-legend", "aria-label": "task states" },
    RUN_STATES_WORST_FIRST.filter((state) => states.has(state)).map((state) =>
      h(
        "li",
        { "data-state": state },
        svg("svg", { width: 12, height: 12, class: "swatch", "aria-hidden": "true" }, svg("rect", { width: 12, height: 12, rx: 2, fill: colourOf(state) })),
        state,
      ),
    ),
  );
}

// The legend and the drawing, to be placed in a scrolling box. ``marked``: names of tasks to
// mark (a definition's on a cycle).
export function dag(tasks, { marked = new Set() } = {}) {
  const columns = layers(byTask(tasks));
  const { rows, edges } = routed(columns);
  order(rows, edges);
  const { width, height } = place(rows);
  const marker = `dag-arrow-${++drawn}`;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "dag", role: "img", "aria-label": "workflow graph" });
  chart.append(
    svg(
      "defs",
      {},
      svg("marker", { id: marker, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" }, svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" })),
    ),
  );
  for (const edge of edges) {
    const onMarked = marked.has(edge.from) && marked.has(edge.to);
    chart.append(svg("path", { d: edgePath(edge.path), class: onMarked ? "edge marked" : "edge", "data-from": edge.from, "data-to": edge.to, "marker-end": `url(#${marker})` }));
  }
  const states = new Set();
  for (const row of rows) {
    for (const node of row) {
      if (node.waypoint) continue;
      const state = taskState(node.task);
      if (state) states.add(state);
      chart.append(box(node.task, node, marked));
    }
  }
  const figure = document.createDocumentFragment();
  figure.append(states.size ? legend(states) : "", chart);
  return figure;
}
