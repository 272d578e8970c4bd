// A run's parentage on its page, both ways: the run it was forked or retried from ("Forked from <run>
// before round 2"), and the forks and retries made from it ("Forks: <run> completed, before round 1"), each
// a link with a "compare" link beside it. What the run document says (`origin`, `forks`, `retries`,
// `derived_more`), nothing more: the server lists only the owner's runs. Not for: the comparison itself
// (diffview.js).

import { badge, h, replace } from "./dom.js";
import { diffHref } from "./diffview.js";
import { $ } from "./page.js";

const SAID = { fork: "Forked from ", retry: "Retried from " };

function runLink(id, className) {
  return h("a", { href: `#/runs/${encodeURIComponent(id)}`, class: className, text: id });
}

function compareLink(runId, other) {
  return h("a", { href: diffHref(runId, other), class: "compare-link", text: "compare" });
}

/** The runs made from `runId` of one relation, as one line: "Forks: <a> completed, before round 1 (compare)". */
function derivedLine(runId, label, runs) {
  if (!runs.length) return null;
  const items = runs.map((run, index) =>
    h(
      "span",
      { class: "derived", dataset: { run: run.id } },
      index ? " · " : "",
      runLink(run.id, "derived-link"),
      " ",
      badge(run.status),
      ` ${run.at || ""} (`,
      compareLink(runId, run.id),
      ")",
    ),
  );
  return h("span", { class: "derived-group" }, `${label}: `, items);
}

/**
 * Show where the run came from and what was made from it; returns the related runs (origin first), as the
 * compare view offers them: `[{id, label}]`.
 */
export function showLineage(doc) {
  const run = doc.run || {};
  const origin = doc.origin;
  const related = [];
  if (origin && typeof origin.run_id === "string") {
    replace(
      $("run-origin"),
      SAID[origin.relation] || "Made from ",
      runLink(origin.run_id, "origin-link"),
      ` ${origin.at || ""} (`,
      compareLink(run.id, origin.run_id),
      ")",
    );
    $("run-origin").hidden = false;
    related.push({ id: origin.run_id, label: `its origin, ${origin.run_id}` });
  } else {
    replace($("run-origin"));
    $("run-origin").hidden = true;
  }
  const forks = Array.isArray(doc.forks) ? doc.forks : [];
  const retries = Array.isArray(doc.retries) ? doc.retries : [];
  for (const fork of forks) related.push({ id: fork.id, label: `its fork ${fork.id} (${fork.at || ""})` });
  for (const retry of retries) related.push({ id: retry.id, label: `its retry ${retry.id} (${retry.at || ""})` });
  const lines = [derivedLine(run.id, "Forks", forks), derivedLine(run.id, "Retries", retries)].filter(Boolean);
  if (doc.derived_more) lines.push(h("span", { class: "muted", text: "and more, listed by GET /v1/runs?origin=" + run.id }));
  replace($("run-derived"), lines.map((line, index) => [index ? h("br") : null, line]));
  $("run-derived").hidden = lines.length === 0;
  return related;
}

export function clearLineage() {
  for (const id of ["run-origin", "run-derived"]) {
    replace($(id));
    $(id).hidden = true;
  }
}
