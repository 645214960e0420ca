// The workflow editor (#/workflow-editor, #/workflow-editor/{id}; docs/dashboard.md): one
// workflow as YAML, checked by the server as it is typed (POST /v1/workflows/check, 400 ms
// after the last key, one request in flight: a newer text aborts the older's, so no stale
// answer is ever shown), each problem listed by its line and marked in a gutter of line
// numbers kept scrolled with the text, and the graph drawn from the text (dag.js). Save
// creates the workflow, or replaces the one edited with the ETag it was read with: a stale
// save (412) says so. The page has no YAML parser of its own: the check's answer carries the
// body to send.

import { ApiError, api } from "../api.js";
import { dag } from "../dag.js";
import { fill, h, link } from "../dom.js";
import { editForm, readForEdit, sendEdit } from "../editor.js";

const CHECK_AFTER_MS = 400;
// The workflow's fields: a refusal naming any of them shows beside the text.
const WORKFLOW_FIELDS = ["name", "tasks", "params", "max_active_runs", "concurrency", "deadline"];
const STARTER = `# One workflow: its name, then its tasks. A task runs a job by name (or waits, or
# asks for an approval) after the tasks it depends on.
name: my-workflow
tasks:
  - name: extract
    job: extract
  - name: load
    job: load
    depends_on: [extract]
`;

export const editorPath = (id) => (id ? `#/workflow-editor/${encodeURIComponent(id)}` : "#/workflow-editor");

// What a task of the text runs, as the graph's box says it.
function runsOf(task) {
  if (task.job) return `job ${task.job}`;
  return task.kind || "(no job, wait or approval)";
}

// The textarea with its line numbers: a gutter of its own, scrolled with the text, where
// ``mark(problems)`` marks each line that has one; ``goTo(line)`` puts the caret there.
function withGutter(textarea) {
  const gutter = h("div", { class: "yaml-gutter", "aria-hidden": "true" });
  let marked = new Map(); // line → its problems' messages
  const draw = () => {
    const count = textarea.value.split("\n").length;
    const numbers = [];
    for (let line = 1; line <= count; line++) {
      const said = marked.get(line);
      numbers.push(h("div", { class: said ? "has-problem" : "", "data-line": line, title: said ? said.join("\n") : undefined }, String(line)));
    }
    fill(gutter, numbers);
    gutter.scrollTop = textarea.scrollTop;
  };
  textarea.setAttribute("wrap", "off");
  textarea.addEventListener("input", draw);
  textarea.addEventListener("scroll", () => {
    gutter.scrollTop = textarea.scrollTop;
  });
  const box = h("div", { class: "yaml-lines" });
  textarea.replaceWith(box);
  box.append(gutter, textarea);
  draw();
  return {
    mark(problems) {
      marked = new Map();
      for (const problem of problems) marked.set(problem.line, [...(marked.get(problem.line) || []), problem.message]);
      draw();
    },
    goTo(line) {
      const lines = textarea.value.split("\n");
      const target = Math.min(Math.max(line, 1), lines.length);
      const start = lines.slice(0, target - 1).reduce((sum, text) => sum + text.length + 1, 0);
      textarea.focus();
      textarea.setSelectionRange(start, start + lines[target - 1].length);
      const lineHeight = parseFloat(getComputedStyle(textarea).lineHeight) || 20;
      textarea.scrollTop = Math.max(0, (target - 1) * lineHeight - textarea.clientHeight / 3);
      gutter.scrollTop = textarea.scrollTop;
    },
  };
}

// Checks the text as it is typed; ``now()`` checks at once (a save's, whose answer it uses).
function checker(textarea, workflowId, ctx, show) {
  let timer = null;
  let inFlight = null; // the AbortController of the request out
  async function check() {
    clearTimeout(timer);
    if (inFlight) inFlight.abort(); // the text changed: its answer would be stale
    const controller = new AbortController();
    inFlight = controller;
    const stop = () => controller.abort();
    ctx.signal.addEventListener("abort", stop);
    try {
      const answer = await api("/v1/workflows/check", {
        method: "POST",
        body: { yaml: textarea.value, workflow_id: workflowId || undefined },
        signal: controller.signal,
      });
      show(answer);
      return answer;
    } finally {
      ctx.signal.removeEventListener("abort", stop);
      if (inFlight === controller) inFlight = null;
    }
  }
  const failed = (error) => {
    if (error && error.name === "AbortError") return;
    if (error instanceof ApiError && error.status !== 401) show(null, error);
    else ctx.fail(error);
  };
  textarea.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => check().catch(failed), CHECK_AFTER_MS);
  });
  ctx.signal.addEventListener("abort", () => clearTimeout(timer));
  return { now: check, soon: () => check().catch(failed) };
}

// The editor of ``yaml`` (the workflow ``workflowId`` as read, with its ``etag``; or a new one).
function editor({ yaml, workflowId = null, etag: readEtag = null, name = "", version = 0 }, ctx) {
  let etag = readEtag;
  const heading = h("h1", {}, workflowId ? `Edit workflow ${name} (version ${version})` : "New workflow");
  const status = h("p", { class: "yaml-status", role: "status" });
  const problemList = h("ol", { class: "yaml-problems", "aria-label": "problems" });
  const graph = h("div", { class: "dag-scroll workflow-draft", "aria-label": "graph of the text" });
  const form = editForm({
    label: workflowId ? "Edit workflow" : "New workflow",
    idPrefix: "workflow-yaml",
    ctx,
    submitText: workflowId ? "Save" : "Create workflow",
    fields: [{ name: "yaml", label: "Workflow (YAML)", kind: "textarea", rows: 18, initial: yaml, paths: WORKFLOW_FIELDS }],
    extra: [status, problemList],
    save: async () => {
      const answer = await check.now(); // the text as it is now, not the last one checked
      if (!answer.valid) {
        const [first] = answer.problems;
        throw new ApiError(422, `Not saved: ${answer.problems.length} problem(s); the first, at line ${first.line}: ${first.message}`, "yaml");
      }
      if (!workflowId) {
        const made = await api("/v1/workflows", { method: "POST", body: answer.workflow });
        ctx.go(`#/workflows?workflow=${encodeURIComponent(made.id)}`);
        return `Created workflow ${made.name}.`;
      }
      const { data: saved, etag: next } = await sendEdit(`/v1/workflows/${encodeURIComponent(workflowId)}`, "PUT", answer.workflow, etag);
      etag = next;
      heading.textContent = `Edit workflow ${saved.name} (version ${saved.version})`;
      return `Saved ${saved.name} as version ${saved.version}.`;
    },
  });
  const textarea = form.input("yaml");
  textarea.setAttribute("autocapitalize", "off");
  const lines = withGutter(textarea);

  function show(answer, error = null) {
    if (error) {
      status.textContent = `Not checked: ${error.message}`;
      status.className = "yaml-status error";
      return;
    }
    const tasks = answer.graph.tasks;
    status.textContent = answer.valid
      ? `Valid: ${tasks.length} task(s), ${answer.graph.edges.length} edge(s).`
      : `${answer.problems.length} problem(s).`;
    status.className = `yaml-status ${answer.valid ? "ok" : "error"}`;
    fill(problemList, answer.problems.map((problem) => h(
      "li",
      { "data-line": problem.line },
      h("button", { type: "button", class: "line-link", onclick: () => lines.goTo(problem.line) }, `line ${problem.line}`),
      problem.path ? h("code", {}, problem.path) : "",
      problem.message,
    )));
    lines.mark(answer.problems);
    const drawn = tasks.map((task) => ({ task: task.name, depends_on: task.depends_on, state: null, runs: runsOf(task) }));
    fill(graph, drawn.length ? dag(drawn, { marked: new Set(answer.graph.cycle) }) : h("p", { class: "empty" }, "No task to draw yet."));
  }

  const check = checker(textarea, workflowId, ctx, show);
  check.soon();
  return [
    heading,
    h("div", { class: "workflow-editor" },
      h("div", { class: "workflow-editor-text" }, form.node),
      h("div", { class: "workflow-editor-graph" }, h("h2", {}, "Graph"), graph)),
  ];
}

export function mount(root, route, ctx) {
  const workflowId = route.id;
  const body = h("div");
  root.append(h("p", {}, link("#/workflows", "← Workflows")), body);
  if (!ctx.may("developer")) {
    fill(body, h("h1", {}, "Workflow editor"), h("p", { class: "empty" }, "Creating and editing workflows needs a developer's or an admin's key."));
  } else if (!workflowId) {
    fill(body, editor({ yaml: STARTER }, ctx));
  } else {
    readForEdit(`/v1/workflows/${encodeURIComponent(workflowId)}/source`, ctx.signal).then(
      ({ data, etag }) => fill(body, editor({ yaml: data.yaml, workflowId: data.id, etag, name: data.name, version: data.version }, ctx)),
      (error) => ctx.fail(error),
    );
  }
  return { async refresh() {} }; // the text is the person's: nothing refreshes under them
}
