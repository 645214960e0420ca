// The console's job form (issue 46 §1): a new job, or an edit of one read with its ETag. The
// program is dropped on the form or picked, checked against the upload limit before a byte
// is sent, uploaded (POST /v1/artifacts) and named by the job; its runtime is guessed from
// its name as the CLI guesses it, and can be changed. Parameters are declared row by row.

import { ApiError, api } from "../api.js";
import { action, h } from "../dom.js";
import { deleteAction, editForm, optional, pairLines, pairs, readForEdit, sendEdit } from "../editor.js";

// herder.cli.jobs._RUNTIME_BY_SUFFIX, herder.domain.jobs.Runtime and MAX_ARTIFACT_BYTES,
// herder.domain.parameters.ParameterType: tests/unit/test_console_job_tables.py keeps these
// JSON literals in step with them.
export const RUNTIME_BY_SUFFIX = {".py": "python", ".zip": "archive", ".tar": "archive", ".tgz": "archive", ".gz": "archive"};
export const RUNTIMES = ["shell", "python", "executable", "archive", "image"];
export const MAX_ARTIFACT_BYTES = 10485760;
export const PARAMETER_TYPES = ["string", "integer", "number", "boolean"];

const TAKES_COMMAND = new Set(["shell", "archive", "image"]);

// The runtime a program named ``filename`` runs in, as ``herder job create --file`` guesses
// it: by its last suffix (Python's ``Path.suffix``), else an executable.
export function runtimeOf(filename) {
  const at = filename.lastIndexOf(".");
  const suffix = at > 0 && at < filename.length - 1 ? filename.slice(at) : "";
  return Object.hasOwn(RUNTIME_BY_SUFFIX, suffix) ? RUNTIME_BY_SUFFIX[suffix] : "executable";
}

function size(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

// Refused here, before any of it is sent: the server would refuse it with 413 anyway.
function tooLarge(file) {
  return new ApiError(413, `${file.name} is ${size(file.size)}: a program may be at most 10 MiB (${MAX_ARTIFACT_BYTES} bytes). Nothing was uploaded.`, "artifact");
}

// The program as one multipart part named "file", sent as any other call is (api.js: a key,
// or a signed-in person's session); any refusal (413, 422) is the program's.
async function upload(file) {
  if (file.size > MAX_ARTIFACT_BYTES) throw tooLarge(file);
  const body = new FormData();
  body.append("file", file, file.name);
  try {
    return await api("/v1/artifacts", { method: "POST", body });
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    throw new ApiError(error.status, `The program was not uploaded: ${error.message}`, "artifact");
  }
}

// A declared parameter's value as its type takes it; text the type cannot read is sent as
// typed, for the API to refuse naming the field.
function typed(type, text) {
  const value = text.trim();
  if (type === "integer" && /^-?\d+$/.test(value)) return Number(value);
  if (type === "number" && value !== "" && Number.isFinite(Number(value))) return Number(value);
  if (type === "boolean" && (value === "true" || value === "false")) return value === "true";
  return type === "string" ? text : value;
}

function shown(value) {
  return value === null || value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value);
}

// The parameter rows: name, type, default, enum (comma-separated), pattern, description.
function parameterRows(declared) {
  const rows = [];
  const list = h("div", { class: "parameter-rows" });
  const error = h("span", { class: "field-error", role: "alert", "data-field": "parameters" });
  function add(parameter = {}) {
    const number = () => rows.indexOf(row) + 1;
    const cell = (name, node) => {
      node.dataset.part = name;
      return node;
    };
    const row = {
      name: cell("name", h("input", { value: parameter.name || "", placeholder: "name", spellcheck: "false" })),
      type: cell("type", h("select", {}, PARAMETER_TYPES.map((type) => h("option", { value: type, selected: type === (parameter.type || "string") }, type)))),
      default: cell("default", h("input", { value: shown(parameter.default), placeholder: "default (none: required)" })),
      enum: cell("enum", h("input", { value: (parameter.enum || []).map(shown).join(", "), placeholder: "enum: a, b, c" })),
      pattern: cell("pattern", h("input", { value: parameter.pattern || "", placeholder: "pattern (RE2)", spellcheck: "false" })),
      description: cell("description", h("input", { value: parameter.description || "", placeholder: "description" })),
    };
    row.node = h("div", { class: "parameter-row" },
      row.name, row.type, row.default, row.enum, row.pattern, row.description,
      h("button", { type: "button", class: "danger", "data-part": "remove", onclick: () => {
        rows.splice(number() - 1, 1);
        row.node.remove();
        relabel();
      } }, "Remove"));
    rows.push(row);
    list.append(row.node);
    relabel();
  }
  // Each row's inputs named by its place ("Parameter 2 default"), again after a removal.
  function relabel() {
    rows.forEach((row, index) => {
      row.node.dataset.parameter = String(index + 1);
      for (const part of row.node.querySelectorAll("[data-part]")) {
        const name = part.dataset.part;
        part.setAttribute("aria-label", name === "remove" ? `Remove parameter ${index + 1}` : `Parameter ${index + 1} ${name}`);
      }
    });
  }
  for (const parameter of declared || []) add(parameter);
  const node = h("fieldset", { class: "parameters" },
    h("legend", {}, "Parameters"),
    h("p", { class: "muted" }, "Each reaches a run as an environment variable of its name; one without a default must be given at every start."),
    list, error,
    h("button", { type: "button", onclick: () => add() }, "Add a parameter"));
  return {
    node,
    value: () => rows.filter((row) => row.name.value.trim() !== "").map((row) => {
      const type = row.type.value;
      const parameter = { name: row.name.value.trim(), type };
      if (row.default.value.trim() !== "") parameter.default = typed(type, row.default.value);
      const choices = row.enum.value.split(",").filter((one) => one.trim() !== "");
      if (choices.length) parameter.enum = choices.map((one) => typed(type, type === "string" ? one.trim() : one));
      if (row.pattern.value !== "") parameter.pattern = row.pattern.value;
      if (row.description.value.trim() !== "") parameter.description = row.description.value.trim();
      return parameter;
    }),
    clear() {
      error.textContent = "";
      for (const row of rows) for (const part of ["name", "type", "default", "enum", "pattern", "description"]) row[part].removeAttribute("aria-invalid");
    },
    // A refusal naming "parameters.N.part" beside the rows, that row's part marked; true if
    // it was one. (Rows left empty are not sent: N counts the rows sent.)
    show(refusal) {
      const match = refusal instanceof ApiError && /^parameters(?:\.(\d+)(?:\.(\w+))?)?/.exec(refusal.field || "");
      if (!match) return false;
      error.textContent = refusal.message;
      const sent = rows.filter((row) => row.name.value.trim() !== "");
      const row = match[1] === undefined ? null : sent[Number(match[1])];
      const named = row && match[2] && Object.hasOwn(row, match[2]) ? row[match[2]] : null;
      const part = row && (named instanceof HTMLElement ? named : row.name);
      if (part) {
        part.setAttribute("aria-invalid", "true");
        part.focus();
      }
      return true;
    },
  };
}

function lines(text) {
  return text.split("\n").map((line) => line.trim()).filter(Boolean);
}

// The form's fields, filled from ``job`` (an edit) or the defaults (a new job).
function fields(job) {
  const spec = job ? job.spec : {};
  const resources = spec.resources || {};
  return [
    { name: "name", label: "Name", required: true, initial: job ? job.name : "", placeholder: "nightly-report", hint: "letters, digits, . _ -" },
    { name: "artifact", label: "Program", kind: "file", paths: ["file"],
      hint: job && spec.artifact ? `Drop a file here or choose one to replace ${spec.artifact.slice(0, 12)}… (at most 10 MiB)` : "Drop a file here or choose one (at most 10 MiB); its runtime is guessed from its name." },
    { name: "runtime", label: "Runtime", kind: "select", initial: spec.runtime || "shell", choices: RUNTIMES.map((one) => [one, one]) },
    { name: "command", label: "Command", initial: spec.command || "", placeholder: "echo hello", hint: "shell and archive: run by /bin/sh -c; image: its command" },
    { name: "image", label: "Image", initial: spec.image || "", placeholder: "registry.example/team/app@sha256:…", hint: "runtime image: an image in a registry (or upload an image archive as the program)" },
    { name: "args", label: "Arguments", kind: "textarea", rows: 2, initial: (spec.args || []).join("\n"), hint: "one a line" },
    { name: "resources.cpu", label: "CPU cores", kind: "number", initial: resources.cpu ?? 1 },
    { name: "resources.memory_mb", label: "Memory (MB)", kind: "number", initial: resources.memory_mb ?? 256 },
    { name: "resources.gpus", label: "GPUs", kind: "number", initial: resources.gpus ?? 0 },
    { name: "timeout_seconds", label: "Timeout (seconds)", kind: "number", initial: spec.timeout_seconds ?? 3600 },
    { name: "retry.max_attempts", label: "Attempts", kind: "number", initial: spec.retry ? spec.retry.max_attempts : 1, hint: "in all: 3 is two retries" },
    { name: "env", label: "Environment", kind: "textarea", rows: 3, initial: pairLines(spec.env), hint: "NAME=value, one a line" },
    { name: "labels", label: "Labels", kind: "textarea", rows: 2, initial: pairLines(spec.labels), hint: "key=value, one a line" },
  ];
}

// The spec the form's values make, over ``base`` (the job read, for an edit: what the form
// does not show, such as disk_mb or the retry's back-off, is kept).
function specOf(values, parameters, artifact, base) {
  const runtime = values.runtime;
  const number = (value, fallback) => optional(value) ?? fallback;
  return {
    runtime,
    command: TAKES_COMMAND.has(runtime) && values.command.trim() ? values.command : null,
    image: runtime === "image" && values.image.trim() ? values.image.trim() : null,
    artifact: runtime === "shell" ? null : artifact,
    args: lines(values.args),
    env: pairs(values.env, "env"),
    labels: pairs(values.labels, "labels"),
    resources: {
      ...(base.resources || {}),
      cpu: number(values["resources.cpu"], undefined),
      memory_mb: number(values["resources.memory_mb"], undefined),
      gpus: number(values["resources.gpus"], undefined),
    },
    timeout_seconds: number(values.timeout_seconds, undefined),
    retry: { ...(base.retry || {}), max_attempts: number(values["retry.max_attempts"], undefined) },
    parameters,
  };
}

// The form, for a new job (``job`` null) or an edit; ``submit(body, file)`` sends it.
function jobForm(ctx, { job = null, label, submitText, submit, extra = [] }) {
  const parameters = parameterRows(job ? job.spec.parameters : []);
  const chosen = h("span", { class: "chosen muted", "aria-live": "polite" });
  const form = editForm({
    label,
    submitText,
    ctx,
    idPrefix: job ? "job-edit" : "job-new",
    fields: fields(job),
    extra: [parameters.node, ...extra],
    save: async (values) => {
      parameters.clear();
      try {
        const file = values.artifact;
        if (file && file.size > MAX_ARTIFACT_BYTES) throw tooLarge(file);
        const artifact = file ? (await upload(file)).id : job ? job.spec.artifact : null;
        const spec = specOf(values, parameters.value(), artifact, job ? job.spec : {});
        return await submit({ name: values.name.trim(), ...spec });
      } catch (error) {
        if (parameters.show(error)) return undefined;
        throw error;
      }
    },
  });
  const fileInput = form.input("artifact");
  const runtime = form.input("runtime");
  const zone = fileInput.closest(".param");
  zone.classList.add("drop-zone");
  zone.append(chosen);
  const showFor = () => {
    const kind = runtime.value;
    form.input("command").closest(".param").hidden = !TAKES_COMMAND.has(kind);
    form.input("image").closest(".param").hidden = kind !== "image";
  };
  const picked = () => {
    const file = fileInput.files.length ? fileInput.files[0] : null;
    form.clear();
    chosen.textContent = file ? `${file.name} · ${size(file.size)}` : "";
    if (!file) return;
    runtime.value = runtimeOf(file.name);
    showFor();
    if (file.size > MAX_ARTIFACT_BYTES) form.show(tooLarge(file));
  };
  fileInput.addEventListener("change", picked);
  runtime.addEventListener("change", showFor);
  // Dropped anywhere on the form: the file input takes it, as if picked.
  form.node.addEventListener("dragover", (event) => {
    event.preventDefault();
    zone.classList.add("dragging");
  });
  form.node.addEventListener("dragleave", () => zone.classList.remove("dragging"));
  form.node.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("dragging");
    const files = event.dataTransfer && event.dataTransfer.files;
    if (!files || !files.length) return;
    fileInput.files = files;
    picked();
  });
  showFor();
  return form;
}

// The Jobs page's "New job": a button for a key that may change definitions, opening the
// form above the list; a created job's page opens.
export function newJob(ctx) {
  if (!ctx.may("developer")) return { button: "", node: "" };
  const node = h("div", { class: "console-form" });
  const open = () => {
    if (node.childElementCount) {
      node.replaceChildren();
      return;
    }
    const form = jobForm(ctx, {
      label: "New job",
      submitText: "Create job",
      submit: async (body) => {
        const job = await api("/v1/jobs", { method: "POST", body });
        ctx.go(`#/jobs/${encodeURIComponent(job.id)}`);
      },
      extra: [h("button", { type: "button", class: "secondary", onclick: () => node.replaceChildren() }, "Cancel")],
    });
    node.replaceChildren(h("h2", {}, "New job"), form.node);
    form.input("name").focus();
  };
  return { button: h("button", { type: "button", onclick: open }, "New job"), node };
}

// A job page's Edit and Delete, for a key that may change definitions: the edit is read with
// its ETag and sent with If-Match, so a change made meanwhile is not overwritten (412).
export function jobEditing(jobId, ctx) {
  const node = h("div", { class: "console-form" });
  const path = `/v1/jobs/${encodeURIComponent(jobId)}`;
  async function edit() {
    const { data: job, etag } = await readForEdit(path, ctx.signal);
    const close = () => node.replaceChildren();
    const form = jobForm(ctx, {
      job,
      label: "Edit job",
      submitText: "Save",
      submit: async (body) => {
        const { data: saved } = await sendEdit(path, "PATCH", body, etag);
        close();
        ctx.notice(`Saved: job ${saved.name} is at version ${saved.version}.`);
        ctx.refresh();
      },
      extra: [h("button", { type: "button", class: "secondary", onclick: close }, "Cancel")],
    });
    node.replaceChildren(h("h2", {}, `Edit job ${job.name} (version ${job.version})`), form.node);
  }
  function actions(job) {
    if (!ctx.may("developer")) return [];
    return [
      action("Edit", async () => {
        await edit();
        return `Editing version ${job.version}.`;
      }, { ctx }),
      " ",
      deleteAction(`job ${job.name}`, path, ctx, () => ctx.go("#/jobs"), `Delete job ${job.name}? Its runs stay in the history.`),
    ];
  }
  return { node, actions };
}
