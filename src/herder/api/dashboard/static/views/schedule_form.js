// The console's schedule form (issue 46 §1): a new schedule of a job, or an edit of one read
// with its ETag. The next fires are previewed as the cron or the zone is typed (debounced,
// POST /v1/cron/preview), in the chosen zone, and an expression the API refuses says why
// beside its field before anything is saved. The job's declared parameters are its fields.

import { ApiError, api } from "../api.js";
import { action, h, when } from "../dom.js";
import { deleteAction, editForm, optional, readForEdit, sendEdit } from "../editor.js";

const PREVIEW_AFTER_MS = 300; // typing pauses this long before the fires are asked for
const PREVIEWED_FIRES = 5;
const JOBS_LISTED = 1000; // the select's jobs: one page, the API's largest
const CONCURRENCY = [["allow", "allow: runs may overlap"], ["forbid", "forbid: skip a fire while one runs"], ["replace", "replace: cancel the one running"]];
const MISFIRES = [["run_once", "run once for the missed times"], ["skip", "skip them"], ["all", "run each, up to the limit"]];
const PARAMS = "overrides.params.";

// Every IANA zone the browser knows, for the zone field's suggestions.
function zoneList(id) {
  const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  return h("datalist", { id }, ["UTC", ...zones.filter((zone) => zone !== "UTC")].map((zone) => h("option", { value: zone })));
}

function browserZoneName() {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
}

function shown(value) {
  return value === null || value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value);
}

// A job's declared parameters as fields named "overrides.params.NAME", so the API's refusal
// of one shows beside it; a given value wins over the declared default.
function paramFields(parameters, given = {}) {
  return (parameters || []).map((parameter) => {
    const initial = Object.hasOwn(given, parameter.name) ? given[parameter.name] : parameter.default;
    const hint = [parameter.type || "string", parameter.description, parameter.pattern ? `matches ${parameter.pattern}` : "", parameter.default === null || parameter.default === undefined ? "required" : ""].filter(Boolean).join(" · ");
    const name = `${PARAMS}${parameter.name}`;
    if (parameter.enum) {
      return { name, label: parameter.name, kind: "select", initial: String(parameter.enum.findIndex((one) => JSON.stringify(one) === JSON.stringify(initial))), hint,
        choices: parameter.enum.map((one, index) => [String(index), shown(one)]), parameter };
    }
    if (parameter.type === "boolean") {
      return { name, label: parameter.name, kind: "select", initial: String(initial ?? ""), hint, choices: [["", "(not set)"], ["true", "true"], ["false", "false"]], parameter };
    }
    return { name, label: parameter.name, initial: shown(initial), hint, parameter };
  });
}

// The params the form's parameter fields hold: an empty field is left to the job's default.
function paramsOf(values, fields) {
  const params = {};
  for (const field of fields) {
    const value = values[field.name];
    const parameter = field.parameter;
    if (parameter.enum) params[parameter.name] = parameter.enum[Number(value)];
    else if (parameter.type === "boolean") {
      if (value !== "") params[parameter.name] = value === "true";
    } else if (value !== "") params[parameter.name] = value;
  }
  return params;
}

// When and how it fires: the fields a new schedule and an edit share, from ``spec``.
function timingFields(spec) {
  return [
    { name: "cron", label: "Cron", required: true, initial: spec.cron || "", placeholder: "0 3 * * *", hint: "minute hour day-of-month month day-of-week, or @daily…" },
    { name: "timezone", label: "Time zone", required: true, initial: spec.timezone || browserZoneName(), placeholder: "Europe/Paris", hint: "an IANA zone: fires follow its wall clock" },
  ];
}

function policyFields(spec) {
  return [
    { name: "concurrency_policy", label: "While a run is active", kind: "select", initial: spec.concurrency_policy || "allow", choices: CONCURRENCY },
    { name: "misfire_policy", label: "Missed fires", kind: "select", initial: spec.misfire_policy || "run_once", choices: MISFIRES },
    { name: "misfire_limit", label: "At most made up", kind: "number", initial: spec.misfire_limit ?? 100 },
    { name: "jitter_seconds", label: "Jitter (seconds)", kind: "number", initial: spec.jitter_seconds ?? 0, hint: "each fire delayed by a fixed share of this, to spread load" },
  ];
}

function policiesOf(values) {
  return {
    cron: values.cron.trim(),
    timezone: values.timezone.trim(),
    concurrency_policy: values.concurrency_policy,
    misfire_policy: values.misfire_policy,
    misfire_limit: optional(values.misfire_limit),
    jitter_seconds: optional(values.jitter_seconds),
  };
}

// The next fires of the form's cron in its zone, asked for as they are typed; a refusal is
// shown beside the field it names (the cron, or the zone).
function previewOf(form) {
  const cron = form.input("cron");
  const timezone = form.input("timezone");
  const list = h("ol", { class: "fires", "aria-label": "Next fires" });
  const note = h("p", { class: "muted" }, "Type a cron to see its next fires.");
  const node = h("div", { class: "preview", "aria-live": "polite" }, h("strong", {}, "Next fires"), note, list);
  const errorOf = (name) => form.node.querySelector(`.field-error[data-field="${name}"]`);
  let timer = null;
  let asking = null;
  function mark(name, message) {
    errorOf(name).textContent = message;
    const input = form.input(name);
    if (message) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
  }
  async function ask() {
    if (asking) asking.abort();
    const mine = new AbortController();
    asking = mine;
    const zone = timezone.value.trim() || "UTC";
    if (!cron.value.trim()) {
      list.replaceChildren();
      note.textContent = "Type a cron to see its next fires.";
      return;
    }
    try {
      const preview = await api("/v1/cron/preview", { method: "POST", body: { cron: cron.value.trim(), timezone: zone, count: PREVIEWED_FIRES }, signal: mine.signal });
      if (asking !== mine) return;
      mark("cron", "");
      mark("timezone", "");
      note.textContent = `In ${preview.timezone}, and in yours:`;
      list.replaceChildren(...preview.fires.map((fire) =>
        h("li", { "data-local": fire.local }, h("span", { class: "local" }, `${fire.local.slice(0, 10)} ${fire.local.slice(11, 19)} ${preview.timezone}`), " · ", when(fire.utc))));
    } catch (error) {
      if (asking !== mine || (error && error.name === "AbortError")) return;
      list.replaceChildren();
      note.textContent = "No fires to show.";
      if (!(error instanceof ApiError)) return;
      const field = error.field || "";
      mark(field === "timezone" ? "timezone" : "cron", error.message);
      mark(field === "timezone" ? "cron" : "timezone", "");
    }
  }
  function soon() {
    clearTimeout(timer);
    timer = setTimeout(ask, PREVIEW_AFTER_MS);
  }
  cron.addEventListener("input", soon);
  timezone.addEventListener("input", soon);
  timezone.addEventListener("change", soon);
  timezone.closest(".param").after(node);
  ask();
}

// The zone field suggests every IANA zone as it is typed.
function suggestZones(form, id) {
  const timezone = form.input("timezone");
  timezone.setAttribute("list", id);
  timezone.after(zoneList(id));
}

// The Schedules page's "New schedule": a button for a key that may change definitions,
// opening the form above the list; a created schedule's page opens.
export function newSchedule(ctx) {
  if (!ctx.may("developer")) return { button: "", node: "" };
  const node = h("div", { class: "console-form" });
  let jobs = null;
  function draw(values = {}) {
    const job = jobs.find((one) => one.id === values.job_id) || jobs[0];
    const params = paramFields(job ? job.spec.parameters : [], values.params || {});
    const form = editForm({
      label: "New schedule",
      submitText: "Create schedule",
      ctx,
      idPrefix: "schedule-new",
      fields: [
        { name: "job_id", label: "Job", kind: "select", required: true, initial: job ? job.id : "", choices: jobs.map((one) => [one.id, one.name]) },
        { name: "name", label: "Name", initial: values.name || "", placeholder: "nightly-report", hint: "optional; letters, digits, . _ -" },
        ...timingFields(values),
        ...params,
        ...policyFields(values),
        { name: "paused", label: "Paused", kind: "checkbox", initial: Boolean(values.paused) },
      ],
      extra: [h("button", { type: "button", class: "secondary", onclick: () => node.replaceChildren() }, "Cancel")],
      save: async (given) => {
        const body = { job_id: given.job_id, ...policiesOf(given), overrides: { params: paramsOf(given, params) }, paused: given.paused };
        if (given.name.trim()) body.name = given.name.trim();
        const schedule = await api("/v1/schedules", { method: "POST", body });
        ctx.go(`#/schedules/${encodeURIComponent(schedule.id)}`);
      },
    });
    suggestZones(form, "schedule-new-zones");
    previewOf(form);
    // Another job: its parameters are the fields, what was typed elsewhere kept.
    form.input("job_id").addEventListener("change", () => {
      const kept = { params: {} };
      for (const name of ["job_id", "name", "cron", "timezone", "concurrency_policy", "misfire_policy", "misfire_limit", "jitter_seconds"]) kept[name] = form.input(name).value;
      kept.paused = form.input("paused").checked;
      draw(kept);
      node.querySelector("select[name=job_id]").focus();
    });
    node.replaceChildren(h("h2", {}, "New schedule"), form.node);
  }
  async function open() {
    if (node.childElementCount) {
      node.replaceChildren();
      return;
    }
    jobs = (await api(`/v1/jobs?limit=${JOBS_LISTED}`, { signal: ctx.signal })).items;
    if (!jobs.length) {
      node.replaceChildren(h("p", { class: "empty" }, "A schedule starts a job: create a job first (Jobs → New job)."));
      return;
    }
    draw();
  }
  const button = h("button", { type: "button", onclick: () => open().catch(ctx.fail) }, "New schedule");
  return { button, node };
}

// A schedule page's Edit and Delete, for a key that may change definitions: the edit is
// read with its ETag and sent with If-Match (a change made meanwhile: 412, said so).
export function scheduleEditing(scheduleId, ctx) {
  const node = h("div", { class: "console-form" });
  const path = `/v1/schedules/${encodeURIComponent(scheduleId)}`;
  async function edit() {
    const { data: schedule, etag } = await readForEdit(path, ctx.signal);
    const spec = schedule.spec;
    const job = schedule.job_id ? await api(`/v1/jobs/${encodeURIComponent(schedule.job_id)}`, { signal: ctx.signal }) : null;
    const params = paramFields(job ? job.spec.parameters : [], (spec.overrides && spec.overrides.params) || {});
    const close = () => node.replaceChildren();
    const form = editForm({
      label: "Edit schedule",
      submitText: "Save",
      ctx,
      idPrefix: "schedule-edit",
      fields: [...timingFields(spec), ...params, ...policyFields(spec)],
      extra: [h("button", { type: "button", class: "secondary", onclick: close }, "Cancel")],
      save: async (given) => {
        const body = policiesOf(given);
        if (job) body.overrides = { ...(spec.overrides || {}), params: paramsOf(given, params) };
        await sendEdit(path, "PATCH", body, etag);
        close();
        ctx.notice("Saved: its next fire was computed afresh.");
        ctx.refresh();
      },
    });
    suggestZones(form, "schedule-edit-zones");
    previewOf(form);
    node.replaceChildren(h("h2", {}, `Edit schedule ${schedule.name || schedule.id}`), form.node);
  }
  function actions(schedule) {
    if (!ctx.may("developer")) return [];
    const name = schedule.name || schedule.id;
    return [
      action("Edit", async () => {
        await edit();
        return `Editing schedule ${name}.`;
      }, { ctx }),
      " ",
      deleteAction(`schedule ${name}`, path, ctx, () => ctx.go("#/schedules"), `Delete schedule ${name}? The runs it started stay in the history.`),
    ];
  }
  return { node, actions };
}
