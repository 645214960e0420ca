// What several views share: whether a run is active, what it runs, who made it, and a run's
// actions.

import { api, query } from "../api.js";
import { action, h, link, pager, fill, when } from "../dom.js";
import { ACTIVE_RUN_STATES, TASK_KIND_OF_JOB_NAME } from "../states.js";

const ACTIVE = new Set(ACTIVE_RUN_STATES);

export function isActive(state) {
  return ACTIVE.has(state);
}

// A run's or workflow run's deadline, and whether the reaper found it unfinished past it.
export function deadline(item) {
  if (!item.deadline_at) return "";
  return [when(item.deadline_at), item.deadline_missed_at ? h("strong", {}, " · missed") : ""];
}

export function runPath(id) {
  return `#/runs/${encodeURIComponent(id)}`;
}

export function workflowRunPath(id) {
  return `#/workflow-runs/${encodeURIComponent(id)}`;
}

// "wait" or "approval" for the run of a workflow task that runs nothing (its job name is
// ":approval", which no job's can be), else null: such a run is a wait, not work done.
export function taskKindOf(run) {
  return Object.hasOwn(TASK_KIND_OF_JOB_NAME, run.job_name) ? TASK_KIND_OF_JOB_NAME[run.job_name] : null;
}

// What a run runs, as people call it: its job's name, or a wait's or approval's task
// ("approval review").
export function runsWhat(run) {
  const kind = taskKindOf(run);
  return kind ? `${kind} ${run.task_name}` : run.job_name;
}

// The same as a link: to the job's runs, or to the task's workflow run.
export function runsWhatLink(run) {
  if (taskKindOf(run)) return link(workflowRunPath(run.workflow_run_id), runsWhat(run));
  return link(`#/runs${query({ job: run.job_name })}`, run.job_name);
}

// Who made it (``created_by``, docs/api.md "Who made it"), as the CLI shows it: a person or
// key by name, the system's actors readably — "schedule" linking to the schedule that fired
// it, "workflow run" to its workflow run, "event", "backfill" — the actor itself on hover;
// "unknown" for what was made before creators were kept.
export function creator(item) {
  const actor = item.created_by;
  if (!actor) return h("span", { class: "creator muted" }, "unknown");
  const [kind, ...rest] = actor.split(":");
  const id = rest.join(":");
  const shown = (text) => h("span", { class: "creator", title: actor }, text);
  if (item.created_by_name) return shown(item.created_by_name);
  if (kind === "schedule") return h("a", { class: "creator", href: `#/schedules/${encodeURIComponent(id)}`, title: actor }, "schedule");
  if (kind === "workflow") return h("a", { class: "creator", href: workflowRunPath(id), title: actor }, "workflow run");
  if (kind === "event" || kind === "backfill") return shown(kind);
  return shown(actor);
}

// The line an object's page says it with: "Created by alice".
export function createdLine(item) {
  return h("p", { class: "created-by" }, "Created by ", creator(item));
}

// "Mine": only what the signed-in key or person made (the API's ``created_by=me``), kept in
// the address (``?mine=1``) as a list's other filters are. In a filter form it submits the
// form (which reads it back); alone it goes to the same page with it flipped.
export function mineToggle(route, ctx) {
  const box = h("input", {
    type: "checkbox",
    name: "mine",
    checked: route.params.get("mine") === "1",
    onchange: () => {
      if (box.form) {
        box.form.requestSubmit();
        return;
      }
      const params = new URLSearchParams(route.params);
      if (box.checked) params.set("mine", "1");
      else params.delete("mine");
      const search = params.toString();
      ctx.go(`#/${route.name}${search ? `?${search}` : ""}`);
    },
  });
  return h("label", { class: "mine", title: "only what you made" }, box, " Mine");
}

// The listing's ``created_by`` for the address's "Mine".
export function mineWanted(params) {
  return params.get("mine") === "1" ? "me" : "";
}

// What an empty list says: that there is none yet, and the command that makes one.
export function noneYet(what, command) {
  return [`No ${what} yet. Create one with `, h("code", { class: "command" }, command), "."];
}

// A workflow run's "awaiting approval: review" while approval tasks wait for a decision.
export function awaiting(run) {
  const tasks = run.awaiting_approval || [];
  return tasks.length ? h("span", { class: "awaiting" }, ` · awaiting approval: ${tasks.join(", ")}`) : "";
}

// Cancel while it is active, re-run once it has ended, each after a confirmation: for a key
// that may (an operator's or more; a viewer's sees none).
export function runActions(run, ctx) {
  if (!ctx.may("operator")) return "";
  const base = `/v1/runs/${encodeURIComponent(run.id)}`;
  if (isActive(run.state)) {
    if (run.cancel_requested) return "cancelling…";
    return action("Cancel", () => api(`${base}/cancel`, { method: "POST" }), {
      ctx,
      danger: true,
      confirmText: `Cancel run ${run.id} (${runsWhat(run)})?`,
    });
  }
  return action(
    "Re-run",
    async () => {
      const rerun = await api(`${base}/rerun`, { method: "POST" });
      ctx.go(runPath(rerun.id));
    },
    { ctx, confirmText: `Re-run run ${run.id} (${runsWhat(run)})? A new run starts.` },
  );
}

// Suspend while it waits or runs (a running one is stopped by its worker, its checkpoint
// saved), resume once suspended; beside the run page's Cancel.
export function suspendActions(run, ctx) {
  if (!ctx.may("operator")) return "";
  const base = `/v1/runs/${encodeURIComponent(run.id)}`;
  if (run.state === "suspended") {
    return action("Resume", () => api(`${base}/resume`, { method: "POST" }), { ctx });
  }
  if (!isActive(run.state) || run.cancel_requested) return "";
  if (run.suspend_requested) return "suspending…";
  return action("Suspend", () => api(`${base}/suspend`, { method: "POST" }), {
    ctx,
    confirmText: `Suspend run ${run.id} (${runsWhat(run)})?`,
  });
}

// A list the server pages by cursor: ``load(cursor)`` reads a page, ``show(page)`` draws it;
// "Older" and "Newer" walk the cursors, and every refresh reloads the page shown.
export function pagedList(ctx, load, show) {
  const node = h("div", { class: "list" });
  let cursors = [];
  let shown = null; // what the page last drew: redrawn only when it changes, so a selection holds
  async function refresh() {
    const page = await load(cursors.at(-1) || "");
    const drawn = JSON.stringify([cursors, page]);
    if (drawn === shown) return;
    shown = drawn;
    fill(node,
      show(page),
      pager(page, cursors, (next) => {
        cursors = next;
        ctx.refresh();
      }),
    );
  }
  return { node, refresh };
}
