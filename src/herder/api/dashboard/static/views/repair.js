// Repairing an ended workflow run: choose the tasks to run again (those that did not
// succeed or skip are ticked), whether their dependents run again too, and repair it in
// place (POST /v1/workflow-runs/<id>/repair with the repair number as read, so a second
// repair from the same reading is refused, 409).

import { api } from "../api.js";
import { h, fill } from "../dom.js";
import { REPAIR_DONE_RUN_STATES } from "../states.js";

const DONE = new Set(REPAIR_DONE_RUN_STATES);

// Task names in order, each with whether any of its instances did not succeed or skip.
function tasksOf(run) {
  const unfinished = new Map();
  for (const task of run.tasks) unfinished.set(task.task, (unfinished.get(task.task) || false) || !DONE.has(task.state));
  return [...unfinished];
}

// A form kept across refreshes (the ticks hold) and drawn again only when the run's state
// or repair number moves; empty unless the run has ended and the key may repair it.
export function repairBox(ctx) {
  const node = h("section", { class: "repair" });
  let drawn = null;
  return {
    node,
    update(run, ended) {
      const key = `${ended && ctx.may("operator")}:${run.state}:${run.repair}`;
      if (key === drawn) return;
      drawn = key;
      fill(node, ended && ctx.may("operator") ? form(run, ctx) : "");
    },
  };
}

function form(run, ctx) {
  const choices = tasksOf(run).map(([name, unfinished]) => {
    const box = h("input", { type: "checkbox", value: name, checked: unfinished });
    return { name, box, view: h("label", { class: "choice" }, box, ` ${name}`) };
  });
  const dependents = h("input", { type: "checkbox" });
  const submit = h("button", { type: "submit" }, "Repair");
  return h(
    "form",
    {
      "aria-label": "Repair",
      onsubmit: async (event) => {
        event.preventDefault();
        const tasks = choices.filter((one) => one.box.checked).map((one) => one.name);
        if (tasks.length === 0) {
          ctx.fail(new Error("choose at least one task to run again"));
          return;
        }
        submit.disabled = true;
        try {
          const body = { repair: run.repair, tasks, dependents: dependents.checked };
          await api(`/v1/workflow-runs/${encodeURIComponent(run.id)}/repair`, { method: "POST", body });
          ctx.notice(`Repair: ${tasks.join(", ")} run again`);
        } catch (error) {
          ctx.fail(error);
        } finally {
          submit.disabled = false;
          ctx.refresh();
        }
      },
    },
    h("h2", {}, "Repair"),
    h("p", { class: "muted" }, "Run these tasks again, in place (the run's history is kept):"),
    h("div", { class: "choices" }, choices.map((one) => one.view)),
    h("label", { class: "choice" }, dependents, " and everything downstream of them"),
    " ",
    submit,
  );
}
