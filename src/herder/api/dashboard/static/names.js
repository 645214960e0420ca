// Names of objects that lists hold only by id (a schedule's job, a rule's channels, an
// incident's rule and subject, a queued run's tenant). Only the ids a page shows are looked
// up, each once while the view is open, so a tenant's thousands of jobs are never listed to
// name fifty.

import { ApiError, api } from "./api.js";

export function nameBook(signal) {
  const known = new Map(); // "/v1/jobs/job_…" → what was read, or null once it is gone
  const pathOf = (collection, id) => `/v1/${collection}/${encodeURIComponent(id)}`;

  // Looks up the ids not yet known; ``collection`` is the API's, e.g. "jobs", "alert-rules".
  async function learn(collection, ids) {
    const paths = [...new Set(ids.filter(Boolean))].map((id) => pathOf(collection, id));
    await Promise.all(
      paths.filter((path) => !known.has(path)).map(async (path) => {
        try {
          known.set(path, await api(path, { signal }));
        } catch (error) {
          if (!(error instanceof ApiError && error.status === 404)) throw error;
          known.set(path, null);
        }
      }),
    );
  }

  // What was read of it (e.g. a rule's kind, a run's job), or null.
  function get(collection, id) {
    return known.get(pathOf(collection, id)) || null;
  }

  // Its name when known, else the id itself.
  function of(collection, id) {
    const found = get(collection, id);
    return (found && found.name) || id;
  }

  return { learn, get, of };
}
