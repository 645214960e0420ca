// A workflow run: its DAG drawn as layers of boxes (a task's layer is its longest path from a
// root, as `herder workflow show` lays it out), each coloured by its state, and its tasks
// listed with their runs.

import { api } from "../api.js";
import { svg } from "../charts.js";
import { action, badge, between, h, link, row, stateClasses, table, when, fill } from "../dom.js";
import { ENDED_WORKFLOW_RUN_STATES, RUN_STATES_WORST_FIRST } from "../states.js";
import { deadline, runPath } from "./common.js";

const BOX = { width: 150, height: 40, gapX: 50, gapY: 16 };

// Tasks by name with their instances (a mapped task has several).
function byTask(tasks) {
  const grouped = new Map();
  for (const instance of tasks) {
    if (!grouped.has(instance.task)) grouped.set(instance.task, { name: instance.task, depends_on: instance.depends_on, instances: [] });
    grouped.get(instance.task).instances.push(instance);
  }
  return [...grouped.values()];
}

// Longest path from a root, by Kahn's order; tasks on a cycle (refused by the API) go last.
export function layers(tasks) {
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

// The state a task's box shows: its worst instance's.
function taskState(task) {
  const states = task.instances.map((instance) => instance.state);
  return RUN_STATES_WORST_FIRST.find((state) => states.includes(state)) || states[0] || "pending";
}

export function dag(tasks) {
  const columns = layers(byTask(tasks));
  const tallest = Math.max(1, ...columns.map((column) => column.length));
  const width = columns.length * (BOX.width + BOX.gapX);
  const height = tallest * (BOX.height + BOX.gapY) + BOX.gapY;
  const where = new Map();
  columns.forEach((column, x) =>
    column.forEach((task, y) => where.set(task.name, { x: x * (BOX.width + BOX.gapX) + 10, y: y * (BOX.height + BOX.gapY) + BOX.gapY })),
  );
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "dag", role: "img", "aria-label": "workflow graph" });
  for (const column of columns) {
    for (const task of column) {
      const to = where.get(task.name);
      for (const up of task.depends_on) {
        const from = where.get(up);
        if (!from) continue;
        const x1 = from.x + BOX.width;
        const y1 = from.y + BOX.height / 2;
        const y2 = to.y + BOX.height / 2;
        chart.append(svg("path", { d: `M${x1},${y1} C${x1 + BOX.gapX / 2},${y1} ${to.x - BOX.gapX / 2},${y2} ${to.x},${y2}`, class: "edge" }));
      }
    }
  }
  for (const column of columns) {
    for (const task of column) {
      const at = where.get(task.name);
      const state = taskState(task);
      const count = task.instances.length > 1 ? ` ×${task.instances.length}` : "";
      const only = task.instances.length === 1 ? task.instances[0] : null;
      const box = svg(
        "g",
        { class: `task ${stateClasses(state)}`, "data-task": task.name, transform: `translate(${at.x},${at.y})` },
        svg("title", {}, `${task.name}: ${state}`),
        svg("rect", { width: BOX.width, height: BOX.height, rx: 6 }),
        svg("text", { x: 8, y: 16, class: "task-name" }, `${task.name.slice(0, 18)}${count}`),
        svg("text", { x: 8, y: 32, class: "task-state" }, state),
      );
      // A task with one run opens it; a mapped one's instances are in the table below.
      chart.append(only && only.run_id ? svg("a", { href: runPath(only.run_id) }, box) : box);
    }
  }
  return chart;
}

// Suspend or Resume (as its state allows) and Cancel, beside the headline.
function actions(run, ended, ctx) {
  if (ended || run.cancel_requested || !ctx.may("operator")) return [];
  const path = `/v1/workflow-runs/${encodeURIComponent(run.id)}`;
  const post = (verb) => () => api(`${path}/${verb}`, { method: "POST" });
  const suspended = run.state === "suspended";
  return [
    suspended
      ? action("Resume", post("resume"), { ctx })
      : run.state === "running"
        ? action("Suspend", post("suspend"), { ctx, confirmText: `Suspend workflow run ${run.id}? Its running tasks are stopped.` })
        : "",
    " ",
    action("Cancel", post("cancel"), { ctx, danger: true, confirmText: `Cancel workflow run ${run.id}?` }),
  ];
}

// Each approval task waiting for a decision: its message, a comment box, Approve and Reject.
function decisions(run, ctx) {
  const waiting = run.tasks.filter((task) => task.kind === "approval" && task.state === "waiting");
  if (waiting.length === 0 || !ctx.may("operator")) return "";
  const path = `/v1/workflow-runs/${encodeURIComponent(run.id)}/tasks`;
  return h(
    "section",
    { class: "decisions" },
    h("h2", {}, "Waiting for a decision"),
    ...waiting.map((task) => {
      const comment = h("input", { type: "text", maxlength: 1000, placeholder: "comment (optional)", "aria-label": `comment on ${task.task}` });
      const decide = (verb) => () =>
        api(`${path}/${encodeURIComponent(task.task)}/${verb}`, {
          method: "POST",
          body: { comment: comment.value || null },
        }).then(() => `${task.task}: ${verb === "approve" ? "approved" : "rejected"}`);
      return h(
        "div",
        { class: "decision", "data-task": task.task },
        h("p", {}, h("strong", {}, task.task), task.message ? ` — ${task.message}` : ""),
        comment,
        " ",
        action("Approve", decide("approve"), { ctx }),
        " ",
        action("Reject", decide("reject"), { ctx, danger: true, confirmText: `Reject ${task.task}?` }),
      );
    }),
  );
}

// Repair's form (imports are hoisted: this one sits with the code that uses it).
import { repairBox } from "./repair.js";

export function mount(root, route, ctx) {
  const id = route.id;
  const body = h("div", {});
  const repair = repairBox(ctx);
  root.append(body);
  return {
    async refresh() {
      // A comment being typed is not redrawn away under the typist.
      if (document.activeElement?.tagName === "INPUT" && body.contains(document.activeElement)) return;
      const run = await api(`/v1/workflow-runs/${encodeURIComponent(id)}`, { signal: ctx.signal });
      const ended = ENDED_WORKFLOW_RUN_STATES.includes(run.state);
      repair.update(run, ended);
      fill(body,
        h("h1", {}, "Workflow run ", h("code", {}, run.id)),
        h(
          "p",
          { class: "headline" },
          badge(run.state),
          ` ${run.workflow_name} v${run.version} · started `,
          run.started_at ? when(run.started_at) : "not yet",
          " ",
          ...actions(run, ended, ctx),
        ),
        run.deadline_at ? h("p", {}, "Deadline ", deadline(run)) : "",
        run.reason ? h("p", {}, run.reason) : "",
        ended ? repair.node : decisions(run, ctx),
        h("div", { class: "dag-scroll" }, dag(run.tasks)),
        h("h2", {}, "Tasks"),
        table(
          ["Task", "Instance", "State", "Run", "Attempts", "Started", "Took", "Why"],
          run.tasks.map((task) =>
            row([
              task.task,
              task.map_index >= 0 ? task.map_index : "",
              badge(task.state),
              task.run_id ? link(runPath(task.run_id), task.run_id) : "",
              task.attempt_count,
              when(task.started_at),
              between(task.started_at, task.finished_at),
              task.reason || "",
            ]),
          ),
        ),
      );
    },
  };
}
