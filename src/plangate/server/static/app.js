// The plangate console: the runs list, the start-a-run box and the page of one run (its live timeline, its
// open interaction, and a formula run's steps), and the Ask view (ask.js). A static ES module page: no build
// step, no framework, nothing fetched from outside the server it is served by. This module asks for the
// token, keeps the runs list fresh and routes between runs (#/runs/<id>) and the Ask view (#/ask…).

import { api, getToken, onTokenNeeded, setToken } from "./api.js";
import { AskView, askRoute } from "./ask.js";
import { badge, clock, h, replace } from "./dom.js";
import { $, clearError, itemsOf, onRunsChanged, showError } from "./page.js";
import { RunView, currentRunId } from "./runview.js";
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

// -- the runs list ----------------------------------------------------------------------------------------

const runsList = { items: [], cursor: null, extra: [], signature: "", timer: null, busy: false };

function runsQuery(cursor) {
  const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
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

function renderRuns() {
  const seen = new Set();
  const runs = [...runsList.items, ...runsList.extra].filter((r) => !seen.has(r.id) && seen.add(r.id));
  const signature = JSON.stringify(runs.map((r) => [r.id, r.status, r.updated_at])) + currentRunId();
  $("runs-more").hidden = !runsList.cursor;
  $("runs-empty").hidden = runs.length > 0;
  const current = runs.find((r) => r.id === currentRunId());
  // while the run's stream is connected it is the fresher source; the list may be a poll behind
  if (current && view.run && !view.following) view.setStatus(current.status);
  if (signature === runsList.signature) return; // nothing changed: keep the DOM (and focus) as it is
  runsList.signature = signature;
  replace(
    $("runs"),
    runs.map((run) =>
      h(
        "li",
        { class: run.id === currentRunId() ? "run-item current" : "run-item", dataset: { run: run.id, status: run.status } },
        h(
          "a",
          { href: `#/runs/${encodeURIComponent(run.id)}`, "aria-current": run.id === currentRunId() ? "page" : null },
          h("span", { class: "run-name", text: run.name || run.id }),
          badge(run.status),
          h("small", { class: "run-sub", text: `${run.kind} · ${clock(run.updated_at || run.created_at)}` }),
        ),
      ),
    ),
  );
}

function resetRunsList() {
  runsList.extra = [];
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

const view = new RunView();
const askView = new AskView();

function showView(name) {
  $("runs-view").hidden = name !== "runs";
  $("ask-view").hidden = name !== "ask";
  for (const [link, which] of [["nav-runs", "runs"], ["nav-ask", "ask"]]) {
    if (which === name) $(link).setAttribute("aria-current", "page");
    else $(link).removeAttribute("aria-current");
  }
}

function route() {
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
}

init();
