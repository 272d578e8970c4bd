// The plangate console: the runs list, the start-a-run box and the page of one run (its live timeline, its
// open interaction, and a formula run's steps), and the Ask view (ask.js). A static ES module page: no build
// step, no framework, nothing fetched from outside the server it is served by. This module asks for the
// token, keeps the runs list fresh (top-level runs; a run's sub-runs nested under it, shown on demand and for
// the run on the page) and routes between runs (#/runs/<id>), the Ask view (#/ask…) and the Schedules view
// (#/schedules…, schedules.js).

import { api, getToken, onTokenNeeded, setToken } from "./api.js";
import { AskView, askRoute } from "./ask.js";
import { badge, clock, h, replace } from "./dom.js";
import { $, clearError, itemsOf, onRunsChanged, showError } from "./page.js";
import { RunView, currentRunId } from "./runview.js";
import { SchedulesView, schedulesRoute } from "./schedules.js";
import { initStartForms, loadFormulas, loadTools } from "./start.js";

const POLL_MS = 2000;
const PAGE_SIZE = 50;

// -- the token --------------------------------------------------------------------------------------------

let tokenPrompt = null;

function askForToken(reason) {
  // several calls may fail with 401 at once: ask the person once
  if (tokenPrompt) return tokenPrompt;
  const dialog = $("token-dialog");
  $("token-reason").textContent = reason
    ? `${reason}. Enter a token for this server; it is kept in this browser only.`
    : "Enter a token for this server; it is kept in this browser only.";
  $("token-input").value = getToken();
  tokenPrompt = new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        tokenPrompt = null;
        const choice = dialog.returnValue;
        if (choice === "save" && $("token-input").value.trim()) {
          setToken($("token-input").value.trim());
          showAuthState();
          resolve(true);
        } else {
          if (choice === "forget") setToken("");
          showAuthState();
          resolve(false);
        }
      },
      { once: true },
    );
  });
  dialog.returnValue = "";
  dialog.showModal();
  $("token-input").focus();
  return tokenPrompt;
}

function showAuthState() {
  $("auth-state").textContent = getToken() ? "token set" : "";
}

// -- the model runs use --------------------------------------------------------------------------------

/** Say which model the server's runs use when they name none, and why none can run when it is missing. */
async function showModel() {
  try {
    const { model } = await api("GET", "/v1/info");
    const shown = $("model-state");
    shown.textContent = model.available
      ? `model: ${model.description}`
      : `model: ${model.spec}, not available here: ${model.problem}`;
    shown.title = model.origin ? `chosen by ${model.origin}` : "";
    shown.classList.toggle("model-missing", !model.available);
  } catch (error) {
    if (error.status !== 401) showError(error);
  }
}

// -- the runs list ----------------------------------------------------------------------------------------

const runsList = {
  items: [],
  cursor: null,
  extra: [],
  signature: "",
  timer: null,
  busy: false,
  expanded: new Set(), // runs whose sub-runs are shown under them
  children: new Map(), // run id -> its sub-runs, as last read
};

function runsQuery(cursor) {
  // sub-runs (a fan-out's, a sub-formula's, an agent step's agent) are listed under their parent
  const params = new URLSearchParams({ limit: String(PAGE_SIZE), top_level: "true" });
  if ($("filter-status").value) params.set("status", $("filter-status").value);
  if ($("filter-kind").value) params.set("kind", $("filter-kind").value);
  if (cursor) params.set("cursor", cursor);
  return `/v1/runs?${params}`;
}

async function refreshRuns() {
  if (runsList.busy) return;
  runsList.busy = true;
  try {
    const page = await api("GET", runsQuery(null));
    runsList.items = itemsOf(page);
    if (!runsList.extra.length) runsList.cursor = page.next_cursor || null;
    await loadChildren([...runsList.expanded]);
    renderRuns();
  } catch (error) {
    if (error.status !== 401) showError(error);
  } finally {
    runsList.busy = false;
  }
}

async function moreRuns() {
  if (!runsList.cursor) return;
  try {
    const page = await api("GET", runsQuery(runsList.cursor));
    runsList.extra.push(...itemsOf(page));
    runsList.cursor = page.next_cursor || null;
    renderRuns();
  } catch (error) {
    showError(error);
  }
}

async function loadChildren(ids) {
  await Promise.all(
    ids.map(async (id) => {
      try {
        const page = await api("GET", `/v1/runs?parent=${encodeURIComponent(id)}&limit=100`);
        runsList.children.set(id, itemsOf(page));
      } catch (error) {
        if (error.status === 404) runsList.expanded.delete(id);
      }
    }),
  );
}

async function toggleChildren(id) {
  if (runsList.expanded.has(id)) runsList.expanded.delete(id);
  else {
    runsList.expanded.add(id);
    await loadChildren([id]);
  }
  runsList.signature = "";
  renderRuns();
}

/** Open the sub-runs of the runs above the one on the page (nearest first), so that it shows in the list. */
async function openLineage(ids) {
  const fresh = ids.filter((id) => !runsList.expanded.has(id));
  if (!fresh.length) return;
  for (const id of fresh) runsList.expanded.add(id);
  await loadChildren(fresh);
  runsList.signature = "";
  renderRuns();
}

function allRuns(runs) {
  const found = [];
  for (const run of runs) {
    found.push(run);
    if (runsList.expanded.has(run.id)) found.push(...allRuns(runsList.children.get(run.id) || []));
  }
  return found;
}

function runItem(run, depth) {
  const current = run.id === currentRunId();
  const open = runsList.expanded.has(run.id);
  const name = run.name || run.id;
  const toggle = run.has_sub_runs
    ? h("button", {
        type: "button",
        class: "link subruns-toggle",
        "aria-expanded": String(open),
        "aria-label": `${open ? "Hide" : "Show"} the sub-runs of ${name}`,
        text: open ? "▾ sub-runs" : "▸ sub-runs",
        onclick: () => toggleChildren(run.id),
      })
    : null;
  const children = open ? runsList.children.get(run.id) || [] : [];
  return h(
    "li",
    { class: current ? "run-item current" : "run-item", dataset: { run: run.id, status: run.status, depth: String(depth) } },
    h(
      "a",
      { href: `#/runs/${encodeURIComponent(run.id)}`, "aria-current": current ? "page" : null },
      h("span", { class: "run-name", text: name }),
      badge(run.status),
      h("small", { class: "run-sub", text: `${run.kind} · ${clock(run.updated_at || run.created_at)}` }),
    ),
    toggle,
    open && children.length
      ? h("ul", { class: "runs nested", "aria-label": `Sub-runs of ${name}` }, children.map((child) => runItem(child, depth + 1)))
      : null,
  );
}

function renderRuns() {
  const seen = new Set();
  const runs = [...runsList.items, ...runsList.extra].filter((r) => !seen.has(r.id) && seen.add(r.id));
  const shown = allRuns(runs);
  const signature =
    JSON.stringify(shown.map((r) => [r.id, r.status, r.updated_at, r.has_sub_runs, runsList.expanded.has(r.id)])) +
    currentRunId();
  $("runs-more").hidden = !runsList.cursor;
  $("runs-empty").hidden = runs.length > 0;
  const current = shown.find((r) => r.id === currentRunId());
  // while the run's stream is connected it is the fresher source; the list may be a poll behind
  if (current && view.run && !view.following) view.setStatus(current.status);
  if (signature === runsList.signature) return; // nothing changed: keep the DOM (and focus) as it is
  runsList.signature = signature;
  replace(
    $("runs"),
    runs.map((run) => runItem(run, 0)),
  );
}

function resetRunsList() {
  runsList.extra = [];
  runsList.children.clear();
  runsList.cursor = null;
  runsList.signature = "";
  refreshRuns();
}

function pollRuns() {
  clearTimeout(runsList.timer);
  runsList.timer = setTimeout(async () => {
    if (!document.hidden) await refreshRuns();
    pollRuns();
  }, POLL_MS);
}

const view = new RunView({ onLineage: (ids) => openLineage(ids) });
const askView = new AskView();
const schedulesView = new SchedulesView();

function showView(name) {
  $("runs-view").hidden = name !== "runs";
  $("ask-view").hidden = name !== "ask";
  $("schedules-view").hidden = name !== "schedules";
  for (const [link, which] of [["nav-runs", "runs"], ["nav-ask", "ask"], ["nav-schedules", "schedules"]]) {
    if (which === name) $(link).setAttribute("aria-current", "page");
    else $(link).removeAttribute("aria-current");
  }
}

function route() {
  const schedule = schedulesRoute();
  if (schedule !== undefined) {
    showView("schedules");
    if (view.id) view.showNone();
    askView.hide();
    schedulesView.open(schedule);
    return;
  }
  schedulesView.hide();
  const conversation = askRoute();
  if (conversation !== undefined) {
    showView("ask");
    if (view.id) view.showNone(); // no run's stream stays open behind the Ask view
    askView.open(conversation);
    return;
  }
  askView.hide();
  showView("runs");
  const id = currentRunId();
  runsList.signature = ""; // redraw the list so the current run is marked
  renderRuns();
  if (!id) {
    view.showNone();
    return;
  }
  if (id !== view.id) view.open(id);
}

// -- start ------------------------------------------------------------------------------------------------

function init() {
  onTokenNeeded(askForToken);
  showAuthState();
  $("token-button").addEventListener("click", async () => {
    if (await askForToken("")) {
      clearError();
      showModel();
      loadFormulas();
      loadTools();
      refreshRuns();
      if (askRoute() !== undefined) {
        askView.hide();
        route();
      }
    }
  });
  $("notice-close").addEventListener("click", clearError);
  onRunsChanged(() => refreshRuns());
  initStartForms();
  $("filter-status").addEventListener("change", resetRunsList);
  $("filter-kind").addEventListener("change", resetRunsList);
  $("runs-refresh").addEventListener("click", resetRunsList);
  $("runs-more").addEventListener("click", moreRuns);
  $("run-cancel").addEventListener("click", () => view.cancel());
  window.addEventListener("hashchange", route);

  // tools first: an interaction card needs the tool's schema to offer an edit form
  loadTools().finally(() => {
    route();
    refreshRuns();
    pollRuns();
  });
  loadFormulas();
  showModel();
}

init();
