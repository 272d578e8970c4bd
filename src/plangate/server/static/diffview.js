// The compare view of a run's page: the run and another run of the owner's side by side, aligned by round
// (two agent runs) or by step, the first divergence marked — what `GET /v1/runs/{a}/diff/{b}` says
// (`plangate diff` says the same). Its address is `#/runs/<a>/diff/<b>`, so a comparison can be linked;
// the run's origin, forks and retries are offered first, then the owner's other runs. Not for: the run's
// own page (runview.js) or its parentage links (lineage.js).

import { api } from "./api.js";
import { h, replace } from "./dom.js";
import { $, itemsOf, showError } from "./page.js";

const ROUTE = /^#\/runs\/([^/?]+)\/diff\/([^/?]+)/;

/** `{a, b}` when the page's address is a comparison, else null. */
export function diffRoute() {
  const match = location.hash.match(ROUTE);
  return match ? { a: decodeURIComponent(match[1]), b: decodeURIComponent(match[2]) } : null;
}

/** The address of the comparison of run `a` with run `b`. */
export function diffHref(a, b) {
  return `#/runs/${encodeURIComponent(a)}/diff/${encodeURIComponent(b)}`;
}

export class DiffView {
  constructor() {
    this.runId = null;
    this.related = [];
    this.others = null; // the owner's runs, loaded when the chooser is first opened
    this.shown = null; // the run compared with now
    $("diff-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const other = $("diff-with").value;
      if (other && this.runId) location.hash = diffHref(this.runId, other);
    });
    $("diff-box").addEventListener("toggle", () => {
      if ($("diff-box").open) this.loadOthers();
    });
    // the run view stays on its run when only the comparison in the address changes
    window.addEventListener("hashchange", () => this.sync());
  }

  /** A run's page opened: offer its related runs, and show the comparison its address names, if any. */
  open(runId, related) {
    this.runId = runId;
    this.others = null;
    this.shown = null;
    replace($("diff"));
    $("diff-box").open = false;
    this.offer(related);
    this.sync();
  }

  /** The run's parentage changed (a refresh): keep the chooser's first options current. */
  offer(related) {
    this.related = related || [];
    this.fillChoices();
  }

  close() {
    this.runId = null;
    this.shown = null;
    replace($("diff"));
  }

  sync() {
    const route = diffRoute();
    if (!this.runId || !route || route.a !== this.runId) {
      if (this.shown !== null) {
        this.shown = null;
        replace($("diff"));
      }
      return;
    }
    if (route.b !== this.shown) this.show(route.b);
  }

  async show(other) {
    const runId = this.runId;
    this.shown = other;
    $("diff-box").open = true;
    replace($("diff"), h("p", { class: "muted", text: "Comparing…" }));
    let found;
    try {
      found = await api("GET", `/v1/runs/${encodeURIComponent(runId)}/diff/${encodeURIComponent(other)}`);
    } catch (error) {
      if (runId !== this.runId || other !== this.shown) return;
      replace($("diff"), h("p", { class: "card-error", role: "alert", text: error.message || String(error) }));
      if (error.status !== 404) showError(error);
      return;
    }
    if (runId !== this.runId || other !== this.shown) return;
    replace($("diff"), render(found));
  }

  async loadOthers() {
    if (this.others !== null || !this.runId) return;
    this.others = [];
    try {
      const page = await api("GET", "/v1/runs?top_level=true&limit=50");
      this.others = itemsOf(page).filter((run) => run.id !== this.runId);
    } catch (error) {
      showError(error);
    }
    this.fillChoices();
  }

  fillChoices() {
    const select = $("diff-with");
    const kept = select.value;
    const near = new Set(this.related.map((run) => run.id));
    const groups = [];
    if (this.related.length) {
      groups.push(h("optgroup", { label: "Its origin, forks and retries" }, this.related.map((run) => h("option", { value: run.id, text: run.label }))));
    }
    const others = (this.others || []).filter((run) => !near.has(run.id));
    if (others.length) {
      const label = (run) => `${run.name && run.name !== run.id ? `${run.name} · ` : ""}${run.id} (${run.kind}, ${run.status})`;
      groups.push(h("optgroup", { label: "Other runs" }, others.map((run) => h("option", { value: run.id, text: label(run) }))));
    }
    replace(select, h("option", { value: "", text: groups.length ? "choose a run…" : "loading your runs…" }), groups);
    if (kept && [...select.options].some((option) => option.value === kept)) select.value = kept;
  }
}

/** The comparison as a summary line and a table: one row per round or step, the first divergence marked. */
function render(found) {
  const unit = found.unit || "step";
  const first = found.first_divergence;
  const summary =
    first === null || first === undefined
      ? h("p", { class: "diff-summary same", role: "status", text: "The runs do not diverge." })
      : h("p", { class: "diff-summary", role: "status" }, h("strong", { text: `First divergence at ${unit} ${first}: ` }), found.why || "");
  const head = h(
    "tr",
    {},
    h("th", { scope: "col", text: unit }),
    h("th", { scope: "col" }, runLink(found.run_a)),
    h("th", { scope: "col" }, runLink(found.run_b)),
  );
  const rows = (found.rows || []).map((row) => {
    const marked = row.key === first;
    const className = marked ? "differs first-divergence" : row.differs ? "differs" : "same";
    return h(
      "tr",
      { class: className, dataset: { key: row.key } },
      h("th", { scope: "row" }, row.key, marked ? h("span", { class: "divergence-mark", text: "◀ first divergence" }) : null),
      cell(row.a),
      cell(row.b),
    );
  });
  const table = h(
    "table",
    { class: "diff-table" },
    h("caption", { text: `${found.run_a} and ${found.run_b}, aligned by ${unit}` }),
    h("thead", {}, head),
    h("tbody", {}, rows),
  );
  return [summary, h("div", { class: "diff-scroll" }, table)];
}

function cell(line) {
  return line === null || line === undefined ? h("td", { class: "none", text: "—" }) : h("td", { text: line });
}

function runLink(id) {
  return h("a", { href: `#/runs/${encodeURIComponent(id)}`, text: id });
}
