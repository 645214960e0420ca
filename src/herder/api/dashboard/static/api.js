// Calls to /v1 with the signed-in key as a bearer token. The key lives in sessionStorage:
// this tab only, gone when it closes; no cookie is ever set, so no other site can act as us.

const KEY = "herder.api_key";

export class ApiError extends Error {
  // ``field``: the request field a 422 (or a 403 for a field) names, e.g. "params.size".
  constructor(status, detail, field = null) {
    super(detail);
    this.status = status;
    this.field = field;
  }
}

function fieldOf(problem) {
  if (!problem) return null;
  if (typeof problem.field === "string") return problem.field;
  const first = Array.isArray(problem.errors) ? problem.errors[0] : null;
  return first && typeof first.field === "string" ? first.field : null;
}

export function apiKey() {
  return sessionStorage.getItem(KEY);
}

export function signIn(key) {
  sessionStorage.setItem(KEY, key);
}

export function signOut() {
  sessionStorage.removeItem(KEY);
}

// Query string from an object: arrays repeat, empty values are left out.
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const one of Array.isArray(value) ? value : [value]) {
      if (one !== undefined && one !== null && one !== "") search.append(name, String(one));
    }
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

// The response's JSON, or an ApiError carrying the problem document's detail.
export async function api(path, options = {}) {
  return (await answer(path, options)).data;
}

// The same with the response's headers (an edge names the cell that answered: Herder-Cell).
export async function answer(path, { method = "GET", body, signal } = {}) {
  const headers = { Authorization: `Bearer ${apiKey() || ""}`, Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  // Relative to the page ("v1/…"), so the dashboard works behind a proxy's path prefix too.
  const response = await fetch(path.replace(/^\//, ""), {
    method,
    headers,
    signal,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  if (response.status === 204) return { data: null, headers: response.headers };
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const detail = (data && (data.detail || data.title)) || `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, typeof detail === "string" ? detail : JSON.stringify(detail), fieldOf(data));
  }
  return { data, headers: response.headers };
}
