// What the signed-in key may do (GET /v1/keys/current), read once per sign-in: the views
// offer an action only to the roles the API lets do it. The roles and their order come
// from the server's states.js; the API still checks every call. The same answer, through an
// edge, names the cell and region the key's tenant lives in (Herder-Cell, Herder-Region).

import { answer } from "./api.js";
import { ROLES_WEAKEST_FIRST } from "./states.js";

let caller = null; // the key's tenant, role and whether it is a system key; null until read
let home = null; // { cell, region } of the key's tenant, when an edge said them

export async function learnRole() {
  if (!caller) {
    const { data, headers } = await answer("/v1/keys/current");
    const cell = headers.get("Herder-Cell");
    home = cell ? { cell, region: headers.get("Herder-Region") || "" } : null;
    caller = data;
  }
  return caller;
}

export function forgetRole() {
  caller = null;
  home = null;
}

// Whether the key's role includes ``needed`` ("operator": start, stop, re-run, repair runs,
// pause, resume and trigger schedules; "developer": change definitions).
export function may(needed) {
  return caller !== null && ROLES_WEAKEST_FIRST.indexOf(caller.role) >= ROLES_WEAKEST_FIRST.indexOf(needed);
}

// Whether the key is a system admin's (an admin of the system tenant): the fleet's pages.
export function isSystemAdmin() {
  return caller !== null && caller.is_system && may("admin");
}

export function homeCell() {
  return home;
}
