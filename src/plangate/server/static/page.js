// What every part of the console page shares: element lookup, the message banner, announcements for
// screen readers, and the signal that the runs list should be refreshed.

export const TERMINAL = new Set(["completed", "failed", "aborted", "exhausted", "cancelled"]);

export const $ = (id) => document.getElementById(id);

/** A collection answer: `{items: [...]}` (a bare list is read the same way). */
export const itemsOf = (data) => (Array.isArray(data) ? data : (data && data.items) || []);

/** Show an error (a ProblemError's message is already written for people) in the banner. */
export function showError(error) {
  $("notice-text").textContent = error && error.message ? error.message : String(error);
  $("notice").hidden = false;
}

export function clearError() {
  $("notice").hidden = true;
  $("notice-text").textContent = "";
}

/** Say something to screen readers (a polite live region). */
export function announce(text) {
  $("announce").textContent = text;
}

const RUNS_CHANGED = "plangate:runs-changed";

/** Ask the runs list to refresh now rather than at its next poll. */
export function runsChanged() {
  document.dispatchEvent(new CustomEvent(RUNS_CHANGED));
}

export function onRunsChanged(handler) {
  document.addEventListener(RUNS_CHANGED, handler);
}
