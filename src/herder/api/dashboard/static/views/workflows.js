// Workflows and their recent runs (each saying when it awaits an approval); a workflow's
// graph drawn from its definition, with what each task runs and no state: none has run. A
// developer or admin opens the editor from here: a new workflow, or the one shown.

import { api, query } from "../api.js";
import { startForm, workflowFields } from "../forms.js";
import { badge, between, h, link, row, table, when, fill } from "../dom.js";
import { awaiting, creator, mineToggle, mineWanted, noneYet, pagedList, workflowRunPath } from "./common.js";
import { dag } from "../dag.js";
import { editorPath } from "./workflow_editor.js";

const PAGE = 50;

function definitionRows(items) {
  return items.map((workflow) =>
    row([
      link(`#/workflows${query({ workflow: workflow.id })}`, workflow.name),
      workflow.version,
      workflow.tasks.length,
      workflow.max_active_runs ?? "",
      when(workflow.updated_at),
      creator(workflow),
    ]),
  );
}

// What a task of the definition runs: its job, or that it waits or asks for an approval.
function runsOf(task) {
  if (task.job) return `job ${task.job}`;
  return task.approval ? "approval" : "wait";
}

function workflowRunRows(items) {
  return items.map((run) =>
    row([
      link(workflowRunPath(run.id), run.id),
      `${run.workflow_name} v${run.version}`,
      [badge(run.state), awaiting(run)],
      when(run.created_at),
      between(run.started_at, run.finished_at),
      run.reason || "",
      creator(run),
    ]),
  );
}

// A run of the workflow with its params (each prefilled with its default), for a key that
// may start runs; it opens the run started.
function starter(workflow, ctx) {
  if (!ctx.may("operator")) return "";
  const start = async (params) => {
    const run = await api(`/v1/workflows/${encodeURIComponent(workflow.id)}/runs`, { method: "POST", body: { params } });
    ctx.go(workflowRunPath(run.id));
  };
  return [h("h2", {}, "Start a run"), startForm(workflowFields(workflow.params), start, ctx)];
}

export function mount(root, route, ctx) {
  const definitions = h("div", { class: "list" });
  const workflowId = route.params.get("workflow") || "";
  const runs = pagedList(
    ctx,
    (cursor) => api(`/v1/workflow-runs${query({ workflow_id: workflowId, created_by: mineWanted(route.params), limit: PAGE, cursor })}`, { signal: ctx.signal }),
    (page) => [
      workflowId ? h("p", {}, "Runs of one workflow · ", link("#/workflows", "show all")) : "",
      table(["Run", "Workflow", "State", "Created", "Took", "Reason", "Created by"], workflowRunRows(page.items), "No workflow runs."),
    ],
  );
  const graph = h("div", {});
  const create = ctx.may("developer") ? h("p", {}, link(editorPath(null), "New workflow")) : "";
  root.append(h("div", { class: "title-bar" }, h("h1", {}, "Workflows"), mineToggle(route, ctx)), create, definitions, graph, h("h2", {}, "Workflow runs"), runs.node);
  return {
    async refresh() {
      const workflows = await api(`/v1/workflows${query({ created_by: mineWanted(route.params), limit: 100 })}`, { signal: ctx.signal });
      fill(definitions, table(["Workflow", "Version", "Tasks", "Max active runs", "Updated", "Created by"], definitionRows(workflows.items), noneYet("workflows", "herder workflow create -f flow.yaml")));
      if (workflowId && !graph.firstChild) {
        const workflow = await api(`/v1/workflows/${encodeURIComponent(workflowId)}`, { signal: ctx.signal });
        const tasks = workflow.tasks.map((task) => ({ task: task.name, depends_on: task.depends_on, state: null, runs: runsOf(task) }));
        const edit = ctx.may("developer") ? h("p", {}, link(editorPath(workflow.id), "Edit")) : "";
        fill(graph, h("h2", {}, `${workflow.name} v${workflow.version}`), edit, h("div", { class: "dag-scroll" }, dag(tasks)), starter(workflow, ctx));
      }
      await runs.refresh();
    },
  };
}
