// A workflow run: its DAG (`dag.js`), its tasks listed with their runs, and what an operator
// may do with it (suspend, resume, cancel, decide approvals, repair once it has ended).

import { api } from "../api.js";
import { dag, taskBadge } from "../dag.js";
import { action, badge, between, h, link, row, table, when, fill } from "../dom.js";
import { ENDED_WORKFLOW_RUN_STATES } from "../states.js";
import { awaiting, createdLine, deadline, runPath } from "./common.js";
import { repairBox } from "./repair.js";

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

export function mount(root, route, ctx) {
  const id = route.id;
  const body = h("div", {});
  const repair = repairBox(ctx);
  root.append(body);
  return {
    async refresh() {
      // A comment being typed is not redrawn away under the typist: asked again once the
      // answer is in, since typing may have begun while it was on its way.
      const typing = () => document.activeElement?.tagName === "INPUT" && body.contains(document.activeElement);
      if (typing()) return;
      const run = await api(`/v1/workflow-runs/${encodeURIComponent(id)}`, { signal: ctx.signal });
      if (typing()) return;
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
          awaiting(run),
          " ",
          ...actions(run, ended, ctx),
        ),
        createdLine(run),
        ended ? h("p", { class: "outcome" }, "Ended: ", run.outcome) : "", // "succeeded, 2 tasks failed and were handled"
        run.deadline_at ? h("p", {}, "Deadline ", deadline(run)) : "",
        run.reason ? h("p", {}, run.reason) : "",
        ended ? "" : decisions(run, ctx),
        h("div", { class: "dag-scroll" }, dag(run.tasks)),
        h("h2", {}, "Tasks"),
        table(
          ["Task", "Instance", "State", "Run", "Attempts", "Started", "Took", "Why"],
          run.tasks.map((task) =>
            row([
              task.task,
              task.map_index >= 0 ? task.map_index : "",
              taskBadge(task.state),
              task.run_id ? link(runPath(task.run_id), task.run_id) : "",
              task.attempt_count,
              when(task.started_at),
              between(task.started_at, task.finished_at),
              task.reason || "",
            ]),
          ),
        ),
        repair.node,
      );
    },
  };
}
