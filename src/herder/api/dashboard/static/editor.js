// The console's forms that create and edit definitions (jobs, schedules, workflows, limits,
// pools, budgets, alerts, triggers, hooks): fields drawn from a plain description, the API's
// refusal shown beside the field it names (a 422's ``field``, e.g. "spec.timeout_seconds"),
// anything else in the form's own banner, and an edit sent with the ETag it was read with, so
// a stale edit (412) says so instead of overwriting someone else's change. Also what the
// forms around them share: a form opened in place, a delete after a confirmation, a secret
// shown once.

import { ApiError, answer, api } from "./api.js";
import { action, fill, h } from "./dom.js";

// A field: { name, label, kind: "text" | "number" | "textarea" | "select" | "checkbox" |
// "file", choices: [[value, text], …] (select; ``multiple``: several chosen, its value a
// list), initial, required, hint, placeholder, rows (textarea), accept (file), autocomplete
// ("off" for a secret typed in, which the browser should not keep), paths: more API field
// names shown beside it }.
function input(field, id) {
  const common = { id, name: field.name, required: field.required || false, autocomplete: field.autocomplete, "aria-describedby": `${id}-error` };
  const initial = field.initial === null || field.initial === undefined ? "" : field.initial;
  switch (field.kind) {
    case "textarea":
      return h("textarea", { ...common, rows: field.rows || 6, spellcheck: "false", placeholder: field.placeholder }, String(initial));
    case "select":
      if (field.multiple) { // several chosen: ``initial`` is the list of their values
        const chosen = new Set((field.initial || []).map(String));
        return h("select", { ...common, multiple: true, size: Math.min(6, Math.max(2, field.choices.length)) },
          field.choices.map(([value, text]) => h("option", { value, selected: chosen.has(String(value)) }, text)));
      }
      return h("select", common, field.choices.map(([value, text]) =>
        h("option", { value, selected: String(value) === String(initial) }, text)));
    case "checkbox":
      return h("input", { ...common, type: "checkbox", checked: Boolean(field.initial), required: false });
    case "file":
      return h("input", { ...common, type: "file", accept: field.accept });
    case "number":
      return h("input", { ...common, type: "number", step: "any", value: initial, placeholder: field.placeholder });
    default:
      return h("input", { ...common, type: "text", value: initial, spellcheck: "false", placeholder: field.placeholder });
  }
}

// A field's value as the form holds it: text as typed ("" when empty), a number or null,
// a checkbox's boolean, a file input's first File or null.
function valueOf(field, node) {
  switch (field.kind) {
    case "checkbox":
      return node.checked;
    case "file":
      return node.files && node.files.length ? node.files[0] : null;
    case "number":
      return node.value.trim() === "" ? null : Number(node.value);
    case "select":
      return field.multiple ? [...node.selectedOptions].map((option) => option.value) : node.value;
    default:
      return node.value;
  }
}

// Whether the API's field path ``path`` belongs to ``field``: its own name, a path under
// it ("spec" owns "spec.timeout_seconds"), or one of its ``paths``.
function owns(field, path) {
  return [field.name, ...(field.paths || [])].some((name) =>
    path === name || path.startsWith(`${name}.`) || path.startsWith(`${name}[`) || path === `body.${name}` || path.startsWith(`body.${name}.`));
}

// ``save(values)`` runs on submit with every field's value by name; it returns what to tell
// the person (text), or nothing. ``idPrefix`` keeps two forms on one page apart.
export function editForm({ label, fields, save, ctx, submitText = "Save", idPrefix = "edit", extra = [] }) {
  const banner = h("p", { class: "form-banner", role: "alert" });
  const rows = fields.map((field) => {
    const id = `${idPrefix}-${field.name.replace(/[^A-Za-z0-9_-]/g, "-")}`;
    const node = input(field, id);
    const error = h("span", { class: "field-error", role: "alert", id: `${id}-error`, "data-field": field.name });
    const caption = h("label", { for: id }, field.label || field.name, field.required ? " *" : "");
    return {
      field, node, error,
      view: h("div", { class: `param field-${field.kind || "text"}` }, caption, node,
        field.hint ? h("small", { class: "muted" }, field.hint) : "", error),
    };
  });
  const submit = h("button", { type: "submit" }, submitText);
  const form = h(
    "form",
    {
      class: "edit-form",
      "aria-label": label,
      novalidate: true,
      onsubmit: async (event) => {
        event.preventDefault();
        clear();
        submit.disabled = true;
        try {
          const values = {};
          for (const one of rows) values[one.field.name] = valueOf(one.field, one.node);
          const said = await save(values);
          if (typeof said === "string") {
            banner.textContent = said;
            banner.className = "form-banner ok";
          }
        } catch (error) {
          show(error);
        } finally {
          submit.disabled = false;
        }
      },
    },
    banner,
    rows.map((one) => one.view),
    extra,
    submit,
  );

  function clear() {
    banner.textContent = "";
    banner.className = "form-banner";
    for (const one of rows) {
      one.error.textContent = "";
      one.node.removeAttribute("aria-invalid");
    }
  }

  // A refusal beside its field; a stale edit, or one naming no field of the form, in the
  // form's banner; a lost connection or a 401 to the view (ctx.fail signs out on 401).
  function show(error) {
    if (!(error instanceof ApiError) || error.status === 401) {
      ctx.fail(error);
      return;
    }
    const beside = error.field && rows.find((one) => owns(one.field, error.field));
    if (beside) {
      beside.error.textContent = error.message;
      beside.node.setAttribute("aria-invalid", "true");
      beside.node.focus();
      return;
    }
    banner.textContent = error.status === 412
      ? `Someone changed this since you opened it (${error.message}). Reload to see their change, then edit again.`
      : error.message;
    banner.className = "form-banner error";
  }

  return { node: form, clear, show, input: (name) => rows.find((one) => one.field.name === name)?.node };
}

// A versioned object and its ETag, read for an edit: ``{ data, etag }``.
export async function readForEdit(path, signal) {
  const { data, headers } = await answer(path, { signal });
  return { data, etag: headers.get("ETag") };
}

// Sends an edit only if the object is still as read (``If-Match``); a 412 if it is not.
// ``{ data, etag }``: the object as saved and its new ETag, for the form's next edit. One read
// without an ETag is not sent at all: unconditional, it could overwrite someone's change.
export async function sendEdit(path, method, body, etag) {
  if (!etag) throw new ApiError(428, "This was read without its ETag, so the edit was not sent. Reload, then edit again.");
  const { data, headers } = await answer(path, { method, body, headers: { "If-Match": etag } });
  return { data, etag: headers.get("ETag") };
}

// A number field's value, or undefined when left empty: a body leaves it to the default.
export function optional(value) {
  return value === null || value === "" ? undefined : value;
}

// Text of "a=b" lines (labels, environment) as an object; a line without "=" is refused
// naming the field. No prototype: "__proto__=x" is a name like any other, sent for the API
// to judge, not an assignment of the object's prototype that silently drops it.
export function pairs(text, field) {
  const result = Object.create(null);
  for (const [index, line] of text.split("\n").entries()) {
    const trimmed = line.trim();
    if (!trimmed) continue;
    const at = trimmed.indexOf("=");
    if (at < 1) throw new ApiError(422, `line ${index + 1}: write name=value`, field);
    result[trimmed.slice(0, at).trim()] = trimmed.slice(at + 1).trim();
  }
  return result;
}

// An object as "a=b" lines, for a textarea.
export function pairLines(map) {
  return Object.entries(map || {}).map(([name, value]) => `${name}=${value}`).join("\n");
}

// A refusal of "FIELD.N…" (a line of a textarea the API took as a list: a pool's shares, a
// tenant's budgets) said as "line N+1: …".
export function byLine(error, field) {
  const at = error instanceof ApiError && error.field ? new RegExp(`^${field}\\.(\\d+)`).exec(error.field) : null;
  if (!at) return error;
  const message = error.message.replace(new RegExp(`^${field}\\.\\d+\\.?`), "");
  return new ApiError(error.status, `line ${Number(at[1]) + 1}: ${message}`, error.field);
}

// The words of a text separated by commas or spaces ("failed, dead"), empty ones left out.
export function words(text) {
  return text.split(/[\s,]+/).map((word) => word.trim()).filter(Boolean);
}

// A form's section: its heading and the form, for a key that may.
export function section(title, ...children) {
  return h("section", { class: "console-form" }, h("h2", {}, title), children);
}

// A button that opens ``draw()``'s form in ``holder`` (closing what was there).
export function opener(text, holder, draw) {
  return h("button", {
    type: "button",
    onclick: async () => {
      try {
        fill(holder, await draw());
        holder.querySelector("input, select, textarea")?.focus();
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        fill(holder, h("p", { class: "form-banner error" }, error.message));
      }
    },
  }, text);
}

// Deletes ``path`` after a confirmation naming ``what``; then ``after()`` (e.g. go to the list).
export function deleteAction(what, path, ctx, after = () => {}, confirmText = `Delete ${what}? This cannot be undone.`) {
  return action("Delete", async () => {
    await api(path, { method: "DELETE" });
    after();
    return `Deleted ${what}.`;
  }, { ctx, danger: true, confirmText });
}

// A secret the API shows once (a hook's signing secret, a webhook channel's): in the page
// with a copy button, kept nowhere else (no storage, no address), so a reload never shows it.
export function shownOnce(title, secret, more = []) {
  const value = h("code", { class: "secret-value", "data-secret": "" }, secret);
  const said = h("span", { class: "muted", role: "status" });
  const panel = h(
    "div",
    { class: "secret-once", role: "region", "aria-label": title },
    h("strong", {}, title),
    h("p", {}, "Shown this once: copy it now and give it to the sender. It cannot be read again; rotate it to get a new one."),
    more,
    h("div", { class: "secret-line" }, value,
      h("button", {
        type: "button",
        onclick: async () => {
          try {
            await navigator.clipboard.writeText(secret);
            said.textContent = "Copied.";
          } catch {
            window.getSelection().selectAllChildren(value);
            said.textContent = "Selected: copy it with your keyboard.";
          }
        },
      }, "Copy"),
      said),
    h("button", { type: "button", onclick: () => panel.remove() }, "Done"),
  );
  return panel;
}
