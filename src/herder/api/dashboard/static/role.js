// What the signed-in key may do (GET /v1/keys/current), read once per sign-in: the views
// offer an action only to the roles the API lets do it. The roles and their order come
// from the server's states.js; the API still checks every call.

import { api } from "./api.js";
import { ROLES_WEAKEST_FIRST } from "./states.js";

let caller = null; // the key's tenant, role and whether it is a system key; null until read

export async function learnRole() {
  if (!caller) caller = await api("/v1/keys/current");
  return caller;
}

export function forgetRole() {
  caller = null;
}

// Whether the key's role includes ``needed`` ("operator": start, stop, re-run, repair runs,
// pause, resume and trigger schedules; "developer": change definitions).
export function may(needed) {
  return caller !== null && ROLES_WEAKEST_FIRST.indexOf(caller.role) >= ROLES_WEAKEST_FIRST.indexOf(needed);
}
