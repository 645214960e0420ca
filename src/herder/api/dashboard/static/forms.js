// The form that starts a run: one field per declared parameter (a job's typed parameters, a
// workflow's params with their defaults), and the API's refusal of a field shown beside it.

import { ApiError } from "./api.js";
import { h } from "./dom.js";

// A job's declared parameters as fields (herder.domain.parameters.Parameter).
export function jobFields(parameters) {
  return (parameters || []).map((parameter) => ({
    name: parameter.name,
    type: parameter.type,
    choices: parameter.enum,
    initial: parameter.default,
    required: parameter.default === null || parameter.default === undefined,
    hint: [parameter.description, parameter.pattern ? `matches ${parameter.pattern}` : ""].filter(Boolean).join(" · "),
  }));
}

// A workflow's params (name → default) as fields, typed by their defaults.
export function workflowFields(params) {
  return Object.entries(params || {}).map(([name, initial]) => ({
    name,
    type: typeof initial === "string" || typeof initial === "number" || typeof initial === "boolean" ? (typeof initial) : "json",
    choices: null,
    initial,
    required: false,
    hint: "",
    untyped: true, // the workflow declares no type: its value is sent as the default's
  }));
}

function shown(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

function input(field) {
  const id = `param-${field.name}`;
  if (field.choices) {
    return h("select", { id, name: field.name }, field.choices.map((choice, index) =>
      h("option", { value: index, selected: JSON.stringify(choice) === JSON.stringify(field.initial) }, shown(choice))));
  }
  if (field.type === "boolean") {
    return h("select", { id, name: field.name },
      ["true", "false"].map((value) => h("option", { value, selected: String(field.initial) === value }, value)));
  }
  const initial = field.initial === null || field.initial === undefined ? "" : shown(field.initial);
  return h("input", { id, name: field.name, value: initial, required: field.required, spellcheck: "false" });
}

// The value a field's input holds, as the API takes it; ``undefined`` leaves a parameter
// to its default. Typed job parameters go as text where typed (the API checks the text).
function valueOf(field, node) {
  if (field.choices) return field.choices[Number(node.value)];
  if (field.type === "boolean") return node.value === "true";
  if (node.value === "" && !field.required) return undefined;
  if (!field.untyped) return node.value;
  if (field.type === "number") return Number.isFinite(Number(node.value)) && node.value.trim() !== "" ? Number(node.value) : node.value;
  if (field.type === "json") {
    try {
      return JSON.parse(node.value);
    } catch {
      throw new ApiError(422, `${field.name} is not JSON`, `params.${field.name}`);
    }
  }
  return node.value;
}

// ``start(params)`` runs on submit; a refusal naming ``params.NAME`` is shown beside that
// field, any other in the view's banner (ctx.fail).
export function startForm(fields, start, ctx, { label = "Start a run" } = {}) {
  const rows = fields.map((field) => {
    const node = input(field);
    const error = h("span", { class: "field-error", role: "alert", "data-field": `params.${field.name}` });
    return {
      field, node, error,
      view: h("div", { class: "param" },
        h("label", { for: node.id }, field.name, field.required ? " *" : "", h("span", { class: "muted" }, ` ${field.type}`)),
        node, field.hint ? h("small", { class: "muted" }, field.hint) : "", error),
    };
  });
  const submit = h("button", { type: "submit" }, label);
  return h(
    "form",
    {
      class: "start-form",
      "aria-label": label,
      onsubmit: async (event) => {
        event.preventDefault();
        for (const one of rows) one.error.textContent = "";
        submit.disabled = true;
        try {
          const params = {};
          for (const one of rows) {
            const value = valueOf(one.field, one.node);
            if (value !== undefined) params[one.field.name] = value;
          }
          await start(params);
        } catch (error) {
          const beside = error instanceof ApiError && rows.find((one) => `params.${one.field.name}` === error.field);
          if (beside) beside.error.textContent = error.message;
          else ctx.fail(error);
        } finally {
          submit.disabled = false;
        }
      },
    },
    rows.length ? rows.map((one) => one.view) : h("p", { class: "muted" }, "It declares no parameters."),
    submit,
  );
}
