// The dashboard's shell: sign-in, routing by URL hash, and the live loop that refreshes the
// current view every two seconds while the tab is visible.

import { ApiError, apiKey, learnSession, signIn, signInConfig, signedInPerson, signOut } from "./api.js";
import { h } from "./dom.js";
import { forgetRole, homeCell, isSystemAdmin, learnRole, may } from "./role.js";
import { browserZone, timeOfDay } from "./time.js";
import * as jobs from "./views/jobs.js";
import * as job from "./views/job.js";
import * as overview from "./views/overview.js";
import * as runs from "./views/runs.js";
import * as run from "./views/run.js";
import * as queue from "./views/queue.js";
import * as dead from "./views/dead.js";
import * as workflows from "./views/workflows.js";
import * as workflowRun from "./views/workflow_run.js";
import * as workflowEditor from "./views/workflow_editor.js";
import * as schedules from "./views/schedules.js";
import * as schedule from "./views/schedule.js";
import * as workers from "./views/workers.js";
import * as alerts from "./views/alerts.js";
import * as usage from "./views/usage.js";
import * as forecast from "./views/forecast.js";
import * as limits from "./views/limits.js";
import * as limit from "./views/limit.js";
import * as pools from "./views/pools.js";
import * as triggers from "./views/triggers.js";
import * as trigger from "./views/trigger.js";
import * as hooks from "./views/hooks.js";
import * as hook from "./views/hook.js";
import * as cells from "./views/cells.js";

const REFRESH_MS = 2000;
// Every page, once: its name in the URL, its entry in the nav (in this order; ``label``), the
// views of its list and of one item, the nav entry it shows under (``under``), and who it is
// for (``system``: a system admin's key; no other key is shown its nav entry, and the page
// itself says what it needs when opened by its address).
const PAGES = [
  { name: "overview", label: "Overview", list: overview },
  { name: "jobs", label: "Jobs", list: jobs, item: job },
  { name: "runs", label: "Runs", list: runs, item: run },
  { name: "queue", label: "Queue", list: queue },
  { name: "dead", label: "Dead letters", list: dead },
  { name: "workflows", label: "Workflows", list: workflows },
  { name: "workflow-runs", list: workflows, item: workflowRun, under: "workflows" },
  { name: "workflow-editor", list: workflowEditor, item: workflowEditor, under: "workflows" },
  { name: "schedules", label: "Schedules", list: schedules, item: schedule },
  { name: "alerts", label: "Alerts", list: alerts },
  { name: "usage", label: "Usage", list: usage },
  { name: "forecast", label: "Forecast", list: forecast },
  { name: "limits", label: "Limits", list: limits, item: limit },
  { name: "pools", label: "Pools", list: pools },
  { name: "triggers", label: "Triggers", list: triggers, item: trigger },
  { name: "hooks", label: "Hooks", list: hooks, item: hook },
  { name: "workers", label: "Workers", list: workers, system: true },
  { name: "cells", label: "Cells", list: cells, system: true },
];
const PAGE_NAMED = new Map(PAGES.map((page) => [page.name, page]));

const byId = (id) => document.getElementById(id);
let current = null; // { view, controller, refreshing }

export function parseRoute(hash) {
  const [path, search = ""] = hash.replace(/^#\/?/, "").split("?");
  const [name = "overview", id = null] = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { name, id, params: new URLSearchParams(search) };
}

// The nav's entries: every page with a label that the key is for; the page shown, marked.
function drawNav(shown) {
  const current = shown.under || shown.name;
  const entries = PAGES.filter((page) => page.label && (!page.system || isSystemAdmin())).map((page) =>
    h("a", { href: `#/${page.name}`, "data-view": page.name, class: page.name === current ? "active" : "" }, page.label),
  );
  byId("nav").replaceChildren(...entries);
}

// The signed-in key's tenant's cell and region, when an edge said them (Herder-Cell).
function drawCell() {
  const home = homeCell();
  byId("cell").hidden = !home;
  byId("cell").textContent = home ? `cell ${home.cell} · region ${home.region}` : "";
}

function showSignIn(message = "") {
  stopView();
  byId("view").hidden = true;
  byId("nav").hidden = true;
  byId("cell").hidden = true;
  byId("sign-out").hidden = true;
  byId("user").hidden = true;
  byId("live").hidden = true;
  byId("zone").hidden = true;
  byId("sign-in").hidden = false;
  byId("sign-in-message").textContent = message;
  byId("api-key").value = "";
  byId("api-key").focus();
}

function stopView() {
  if (current) {
    current.controller.abort();
    current = null;
  }
}

function status(text, isError = false) {
  const live = byId("live");
  live.hidden = false;
  live.textContent = text;
  live.classList.toggle("error", isError);
}

// Shows what went wrong at the top of the view. A failed refresh's message goes away when a
// refresh succeeds again; a failed action's stays until the next action or view.
function fail(error, source = "action") {
  if (error instanceof ApiError && error.status === 401) {
    signOut();
    showSignIn("The key was not accepted (it may have been revoked or expired). Sign in again.");
    return;
  }
  if (error && error.name === "AbortError") return;
  const message = error instanceof ApiError ? error.message : `Cannot reach the server: ${error.message}`;
  const banner = byId("view").querySelector(".banner");
  if (banner) {
    banner.textContent = message;
    banner.className = "banner error";
    banner.dataset.source = source;
  }
  if (source === "refresh") status("not updated", true);
}

function notice(text) {
  const banner = byId("view").querySelector(".banner");
  if (banner) {
    banner.textContent = text;
    banner.className = "banner ok";
    banner.dataset.source = "action";
  }
}

async function refresh() {
  const view = current;
  if (!view || view.refreshing) return;
  view.refreshing = true;
  try {
    await view.refresh();
    if (current === view) {
      status(`live · ${timeOfDay(Date.now())}`);
      const banner = byId("view").querySelector(".banner");
      if (banner && banner.dataset.source === "refresh") banner.replaceChildren();
    }
  } catch (error) {
    if (current === view) fail(error, "refresh");
  } finally {
    view.refreshing = false;
  }
}

function go(hash) {
  if (window.location.hash === hash) route();
  else window.location.hash = hash;
}

let routing = 0; // the latest route(): an earlier one still learning the role gives way

async function route() {
  if (!apiKey() && !signedInPerson()) {
    showSignIn();
    return;
  }
  stopView();
  const mine = ++routing;
  try {
    await learnRole(); // once per sign-in: which actions to offer
  } catch (error) {
    if (mine !== routing) return;
    if (error instanceof ApiError && error.status === 401) {
      fail(error);
      return;
    }
    // offline for a moment: the view shows no actions until the next route learns the role
  }
  if (mine !== routing) return;
  const where = parseRoute(window.location.hash);
  const page = PAGE_NAMED.get(where.name) || PAGE_NAMED.get("overview");
  const module = where.id ? page.item || page.list : page.list;
  drawNav(page);
  drawCell();
  byId("sign-in").hidden = true;
  byId("nav").hidden = false;
  byId("sign-out").hidden = false;
  byId("user").hidden = !signedInPerson();
  byId("user").textContent = signedInPerson() ? signedInPerson().user_name : "";
  byId("zone").hidden = false;
  byId("zone").textContent = `times in ${browserZone()}`;
  const root = byId("view");
  root.hidden = false;
  root.replaceChildren(h("p", { class: "banner", role: "status" }));
  const controller = new AbortController();
  const ctx = { signal: controller.signal, refresh, fail, notice, go, may };
  const mounted = module.mount(root, where, ctx);
  current = { controller, refreshing: false, refresh: mounted.refresh };
  document.title = `Herder · ${where.name}`;
  refresh();
}

byId("sign-in").addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = byId("api-key").value.trim();
  if (!key) return;
  signIn(key);
  forgetRole();
  try {
    await learnRole(); // any key that may read its tenant passes
  } catch (error) {
    signOut();
    const message = error instanceof ApiError && error.status === 401 ? "That key was not accepted." : error.message;
    showSignIn(message);
    return;
  }
  route();
});

byId("sign-out").addEventListener("click", () => {
  signOut();
  forgetRole();
  showSignIn("Signed out.");
});

// Single sign-on: the provider's button when the server offers one; a session cookie the
// browser already has (back from the provider) signs in without a key.
async function start() {
  try {
    const config = await signInConfig();
    if (config.enabled) {
      byId("sso-link").textContent = `Sign in with ${config.provider_name}`;
      byId("sso").hidden = false;
    }
    if (config.enabled && !apiKey()) await learnSession();
  } catch {
    // no provider reachable: the key's sign-in stays
  }
  route();
}

window.addEventListener("hashchange", route);
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) refresh();
});
setInterval(() => {
  if (!document.hidden) refresh();
}, REFRESH_MS);
start();
byId("starting").remove(); // started: from here on, the views report what goes wrong
