// Triggers (docs/events.md): which events start which job or workflow, with parameters read
// from the event; a developer or admin makes one here (its edit and delete: trigger.js).

import { api, query } from "../api.js";
import { fill, h, link, row, table } from "../dom.js";
import { editForm, pairLines, pairs, section } from "../editor.js";
import { noneYet } from "./common.js";

export const triggerPath = (id) => `#/triggers/${encodeURIComponent(id)}`;

// What it starts: "job build" or "workflow nightly".
export function starts(trigger) {
  return trigger.job !== null && trigger.job !== undefined ? `job ${trigger.job}` : `workflow ${trigger.workflow}`;
}

export function paramsShown(params) {
  return Object.entries(params || {}).map(([name, source]) => h("span", { class: "param" }, `${name}=${source}`));
}

// A trigger's fields (its name only when it is made), each beside the API's field it fills.
export function triggerFields(trigger = null) {
  const fields = [
    { name: "event", label: "Event", required: true, initial: trigger?.event, placeholder: "github.push" },
    { name: "filter", label: "Filter", kind: "textarea", rows: 2, initial: trigger?.filter, placeholder: "payload.ref == 'refs/heads/main'", hint: "empty: every such event" },
    { name: "target", label: "Starts a", kind: "select", choices: [["job", "job"], ["workflow", "workflow"]], initial: trigger?.workflow ? "workflow" : "job" },
    { name: "target_name", label: "Job or workflow (name)", required: true, initial: trigger?.job || trigger?.workflow, paths: ["job", "workflow"] },
    { name: "params", label: "Parameters (NAME=path or literal)", kind: "textarea", rows: 3, initial: pairLines(trigger?.params), placeholder: "BRANCH=payload.ref" },
    { name: "enabled", label: "Enabled", kind: "checkbox", initial: trigger ? trigger.enabled : true },
  ];
  return trigger ? fields : [{ name: "name", label: "Name", required: true, hint: "lower case" }, ...fields];
}

export function triggerSpec(values) {
  const target = values.target_name.trim();
  return {
    event: values.event,
    filter: values.filter.trim() ? values.filter : null,
    job: values.target === "job" ? target : null,
    workflow: values.target === "workflow" ? target : null,
    params: pairs(values.params, "params"),
    enabled: values.enabled,
  };
}

function createSection(ctx) {
  const form = editForm({
    label: "New trigger",
    fields: triggerFields(),
    ctx,
    idPrefix: "new-trigger",
    submitText: "Create trigger",
    save: async (values) => {
      const made = await api("/v1/triggers", { method: "POST", body: { name: values.name, ...triggerSpec(values) } });
      ctx.refresh();
      return `Created trigger ${made.name}.`;
    },
  });
  return section("New trigger", form.node);
}

export function mount(root, _route, ctx) {
  const body = h("div", { class: "list" });
  root.append(h("h1", {}, "Triggers"), h("p", { class: "muted" }, "Which events start which job or workflow, with parameters read from the event."), body,
    ctx.may("developer") ? createSection(ctx) : "");
  return {
    async refresh() {
      const page = await api(`/v1/triggers${query({ limit: 100 })}`, { signal: ctx.signal });
      const rows = page.items.map((trigger) =>
        row([link(triggerPath(trigger.id), trigger.name), h("code", {}, trigger.event), trigger.filter ? h("code", {}, trigger.filter) : "every one",
             starts(trigger), paramsShown(trigger.params), trigger.enabled ? "enabled" : "disabled"], { "data-trigger": trigger.name }),
      );
      fill(body, table(["Trigger", "Event", "Filter", "Starts", "Parameters", "Enabled"], rows,
        noneYet("triggers", "herder trigger create NAME --event EVENT --job JOB")));
    },
  };
}
