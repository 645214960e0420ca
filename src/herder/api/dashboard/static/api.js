// Calls to /v1 with the signed-in key as a bearer token. The key lives in sessionStorage:
// this tab only, gone when it closes. A person signed in through the provider (single
// sign-on) has instead the server's session cookie (HttpOnly: never seen here); their calls
// send it (same origin only) with the CSRF token GET auth/session gave, which no other site
// can read, so no other site can act as them.

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
  if (session) {
    const csrf = session.csrf_token;
    session = null;
    // the server revokes the session and clears its cookie
    fetch("auth/logout", { method: "POST", headers: { "X-Herder-CSRF": csrf }, credentials: "same-origin" }).catch(() => {});
  }
}

let session = null; // the provider's sign-in: { user_name, csrf_token, … } from GET auth/session

// The session cookie's person, if the browser has one (asked once per page: null otherwise).
export async function learnSession() {
  const response = await fetch("auth/session", { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } });
  const data = response.ok ? await response.json() : null;
  session = data && data.csrf_token ? data : null;
  return session;
}

export function signedInPerson() {
  return session;
}

// Whether this server offers sign-in through an OpenID provider, and the button's name.
export async function signInConfig() {
  const response = await fetch("auth/config", { credentials: "omit", cache: "no-store" });
  return response.ok ? response.json() : { enabled: false };
}

// The credentials of a call: the key as a bearer, else the cookie with the CSRF token.
function authorization() {
  const key = apiKey();
  if (key || !session) return { headers: { Authorization: `Bearer ${key || ""}` }, credentials: "omit" };
  return { headers: { "X-Herder-CSRF": session.csrf_token }, credentials: "same-origin" };
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
// ``headers``: more request headers, e.g. an edit's ``If-Match`` (the ETag it was read with).
export async function answer(path, { method = "GET", body, signal, headers: more = {} } = {}) {
  const auth = authorization();
  const headers = { ...more, ...auth.headers, Accept: "application/json" };
  const form = body instanceof FormData; // an upload: the browser sets its multipart type
  if (body !== undefined && !form) headers["Content-Type"] = "application/json";
  // Relative to the page ("v1/…"), so the dashboard works behind a proxy's path prefix too.
  const response = await fetch(path.replace(/^\//, ""), {
    method,
    headers,
    signal,
    body: body === undefined || form ? body : JSON.stringify(body),
    credentials: auth.credentials,
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
