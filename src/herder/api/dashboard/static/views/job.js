// One job: what it runs, a form that starts a run of it with its declared parameters (for
// a key that may start runs), and its runs.

import { api, query } from "../api.js";
import { h, fill, resources, table } from "../dom.js";
import { jobFields, startForm } from "../forms.js";
import { pagedList, runPath } from "./common.js";
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
  root.append(head, form, h("h2", {}, "Runs"), runs.node);
  let shown = null; // the job's version drawn: the form is rebuilt only when the job changes
  return {
    async refresh() {
      const job = await api(`/v1/jobs/${id}`, { signal: ctx.signal });
      if (shown !== job.version) {
        shown = job.version;
        fill(head,
          h("h1", {}, "Job ", h("code", {}, job.name)),
          h("p", {}, job.spec.runtime, job.spec.command ? [" · ", h("code", {}, job.spec.command)] : "", " · ", resources(job.spec.resources)),
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
