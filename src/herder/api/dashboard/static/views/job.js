// One job: what it runs, a form that starts a run of it with its declared parameters (for
// a key that may start runs), and its runs.

import { api, query } from "../api.js";
import { h, fill, resources, table } from "../dom.js";
import { jobFields, startForm } from "../forms.js";
import { jobEditing } from "./job_form.js";
import { jobNotices } from "./job_notices.js";
import { createdLine, pagedList, runPath } from "./common.js";
import { RUN_HEADINGS, runRows } from "./runs.js";

const RUNS_PAGE = 20;

export function mount(root, route, ctx) {
  const id = encodeURIComponent(route.id);
  const head = h("div", {});
  const form = h("div", {});
  const runs = pagedList(
    ctx,
    (cursor) => api(`/v1/runs${query({ job_id: route.id, limit: RUNS_PAGE, cursor })}`, { signal: ctx.signal }),
    (page) => table(RUN_HEADINGS, runRows(page.items, ctx), "No runs yet."),
  );
  const editing = jobEditing(route.id, ctx); // Edit and Delete, for a key that may
  root.append(head, editing.node, form, jobNotices(route.id, ctx), h("h2", {}, "Runs"), runs.node);
  let shown = null; // the job's version drawn: the form is rebuilt only when the job changes
  return {
    async refresh() {
      const job = await api(`/v1/jobs/${id}`, { signal: ctx.signal });
      if (shown !== job.version) {
        shown = job.version;
        fill(head,
          h("h1", {}, "Job ", h("code", {}, job.name)),
          h("p", {}, job.spec.runtime, job.spec.command ? [" · ", h("code", {}, job.spec.command)] : "", " · ", resources(job.spec.resources)),
          createdLine(job),
          h("p", { class: "actions" }, editing.actions(job)),
        );
        const start = async (params) => {
          const run = await api(`/v1/jobs/${id}/runs`, { method: "POST", body: { params } });
          ctx.go(runPath(run.id));
        };
        fill(form, ctx.may("operator") ? [h("h2", {}, "Start a run"), startForm(jobFields(job.spec.parameters), start, ctx)] : "");
      }
      await runs.refresh();
    },
  };
}
