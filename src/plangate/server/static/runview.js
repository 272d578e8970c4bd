// The page of one run: its header and status (and the run it is a sub-run of, linked; the run it was forked
// or retried from and its own forks and retries: lineage.js), the open interaction at the top (its own, or
// one asked inside it by a sub-run or an agent step's agent: one place to answer, with a link to the run
// that asks), the outcome, the comparison with another run (diffview.js), its sub-runs, a formula run's
// steps as a DAG, and the timeline, all kept live from the run's event stream. The run document is what
// says which question is open: replayed events never bring back a card.

import { api, followEvents } from "./api.js";
import { StepGraph } from "./dag.js";
import { DiffView } from "./diffview.js";
import { badge, clock, h, replace, usageText } from "./dom.js";
import { interactionCard, normalizeInteraction } from "./interaction.js";
import { clearLineage, showLineage } from "./lineage.js";
import { $, TERMINAL, announce, runsChanged, showError } from "./page.js";
import { catalog } from "./start.js";
import { Timeline } from "./timeline.js";

/** The step of `parentId` whose agent is the run `childId` (`<parent>.<step>.agent<N>`), or null. */
function stepOf(parentId, childId) {
  const prefix = `${parentId}.`;
  if (!childId.startsWith(prefix)) return null;
  const rest = childId.slice(prefix.length);
  const match = rest.match(/^(.+)\.agent\d+$/);
  return match ? match[1] : null;
}

export function currentRunId() {
  const match = location.hash.match(/^#\/runs\/([^/?]+)/);
  return match ? decodeURIComponent(match[1]) : null;
}

/** What a run is called in a line: its name and id, or its id. */
function runLabel(run) {
  return run.name && run.name !== run.id ? `${run.name} (${run.id})` : run.id;
}

export class RunView {
  /** `onLineage(ids)` hears the runs above the one shown (nearest first), for the runs list to open. */
  constructor({ onLineage = () => {} } = {}) {
    this.onLineage = onLineage;
    this.run = null;
    this.controller = null;
    this.timeline = new Timeline($("timeline"));
    this.timeline.onFork = (body) => this.fork(body);
    this.graph = new StepGraph($("steps"));
    this.diff = new DiffView();
    this.interaction = null;
    this.refreshTimer = null;
    this.following = false;
    this.lastSeq = 0;
    this.docSeq = 0; // the run's last event when its document was read: events up to it are history
    this.subRuns = [];
  }

  async open(id) {
    this.close();
    this.id = id;
    $("run-empty").hidden = true;
    $("run-detail").hidden = false;
    $("run-title").textContent = id;
    $("run-meta").textContent = "loading…";
    $("run-live").textContent = "";
    this.controller = new AbortController();
    const { signal } = this.controller;
    try {
      await this.refresh();
    } catch (error) {
      if (signal.aborted) return;
      $("run-meta").textContent = "";
      $("run-title").textContent = error.status === 404 ? "Run not found" : "This run could not be loaded";
      showError(error);
      return;
    }
    if (!signal.aborted) this.follow(0);
  }

  close() {
    if (this.controller) this.controller.abort();
    this.disarmCancel();
    this.controller = null;
    clearTimeout(this.refreshTimer);
    this.run = null;
    this.status = null;
    this.interaction = null;
    this.following = false;
    this.ended = false;
    this.lastSeq = 0;
    this.docSeq = 0;
    this.subRuns = [];
    this.timeline.reset();
    replace($("run-status"));
    this.graph.setSteps({});
    replace($("interaction"));
    replace($("outcome"));
    $("steps-section").hidden = true;
    $("subruns-section").hidden = true;
    $("run-parent").hidden = true;
    replace($("run-parent"));
    clearLineage();
    this.diff.close();
  }

  showNone() {
    this.close();
    this.id = null;
    $("run-empty").hidden = false;
    $("run-detail").hidden = true;
  }

  /** Load the run document and redraw the header, the interaction card, the outcome and the steps. */
  async refresh() {
    const id = this.id;
    const doc = await api("GET", `/v1/runs/${encodeURIComponent(id)}`);
    if (id !== this.id) return;
    const first = this.run === null;
    this.run = doc.run;
    const run = doc.run;
    this.docSeq = Math.max(this.docSeq, Number(run.last_seq) || 0);
    this.timeline.runKind = run.kind;
    $("run-title").textContent = run.name || run.id;
    $("run-meta").textContent = `${run.kind} run ${run.id} · started ${clock(run.created_at)}`;
    this.setStatus(run.status);
    this.subRuns = Array.isArray(doc.sub_runs) ? doc.sub_runs : [];
    this.showSubRuns(Boolean(doc.sub_runs_more));
    this.showInteraction(TERMINAL.has(run.status) ? null : normalizeInteraction(doc.interaction, run.kind));
    if (run.outcome) this.showOutcome(run.outcome);
    if (doc.steps && Object.keys(doc.steps).length) {
      $("steps-section").hidden = false;
      this.graph.setSteps(doc.steps);
    }
    if (first) this.showParent(run).catch(() => {});
    const related = showLineage(doc);
    if (first) this.diff.open(run.id, related);
    else this.diff.offer(related);
  }

  /** Fork the run (an agent's, before a round) or retry it (a formula's, from a step), then show the new run. */
  async fork(body) {
    if (!this.id) return;
    try {
      const created = await api("POST", `/v1/runs/${encodeURIComponent(this.id)}/fork`, body);
      announce("at_round" in body ? "Forked: the new run goes on from there." : "Retrying from that step.");
      runsChanged();
      location.hash = `#/runs/${encodeURIComponent(created.run.id)}`;
    } catch (error) {
      showError(error);
    }
  }

  /** "Sub-run of <parent>", linked, and the runs above it handed to the runs list. */
  async showParent(run) {
    if (!run.parent_run_id) return;
    const id = this.id;
    const parent = (await api("GET", `/v1/runs/${encodeURIComponent(run.parent_run_id)}`)).run;
    if (id !== this.id) return;
    const step = stepOf(parent.id, run.id);
    replace(
      $("run-parent"),
      run.kind === "agent" && step ? `The agent of step ${step} of ` : "Sub-run of ",
      h("a", { href: `#/runs/${encodeURIComponent(parent.id)}`, class: "parent-link", text: runLabel(parent) }),
    );
    $("run-parent").hidden = false;
    const lineage = [parent.id];
    let above = parent;
    while (above.parent_run_id && lineage.length < 10) {
      above = (await api("GET", `/v1/runs/${encodeURIComponent(above.parent_run_id)}`)).run;
      lineage.push(above.id);
    }
    if (id === this.id) this.onLineage(lineage);
  }

  showSubRuns(more) {
    $("subruns-section").hidden = this.subRuns.length === 0;
    $("subruns-more").hidden = !more;
    replace(
      $("subruns"),
      this.subRuns.map((child) =>
        h(
          "li",
          { class: "subrun", dataset: { run: child.id, status: child.status } },
          h("a", { href: `#/runs/${encodeURIComponent(child.id)}`, text: runLabel(child) }),
          " ",
          badge(child.status),
          h("small", { class: "muted", text: ` ${child.kind}` }),
        ),
      ),
    );
  }

  scheduleRefresh() {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => this.refresh().catch(() => {}), 300);
  }

  follow(after) {
    if (this.following || this.ended || !this.controller) return;
    this.following = true;
    const id = this.id;
    const controller = this.controller;
    const { signal } = controller;
    followEvents(id, {
      after,
      signal,
      onEvent: (type, data, seq) => {
        if (Number.isFinite(seq)) this.lastSeq = Math.max(this.lastSeq, seq);
        this.onEvent(type, data);
      },
      onState: (state) => {
        const words = { live: "● live", reconnecting: "reconnecting…", ended: "finished" };
        $("run-live").textContent = words[state] || state;
      },
    })
      .catch((error) => {
        if (!signal.aborted) showError(error);
      })
      .finally(() => {
        // only this stream's own view: a reopened page has a new controller and its own stream
        if (controller === this.controller) this.following = false;
      });
  }

  onEvent(type, data) {
    const event = data || {};
    this.timeline.add(type, event);
    // an event the run document already took into account (replayed history) changes no card
    const live = typeof event.seq !== "number" || event.seq > this.docSeq;
    switch (type) {
      case "interaction_opened":
        if (!live) break;
        this.setStatus("waiting");
        this.showInteraction(normalizeInteraction(event, this.run ? this.run.kind : ""));
        announce(`The run is waiting for you: ${event.prompt || ""}`);
        break;
      case "interaction_resolved":
        if (!live) break;
        if (this.interaction && this.interaction.id === event.interaction_id) this.showInteraction(null);
        if (!TERMINAL.has(this.status)) this.setStatus("running");
        this.scheduleRefresh();
        break;
      case "step_state":
        $("steps-section").hidden = false;
        // a step that waits may wait on a question asked inside it (its agent's, its sub-run's): the run
        // document brings that question to this page
        if (this.graph.stepState(event) || (live && event.status === "waiting")) this.scheduleRefresh();
        break;
      case "gate":
        this.graph.gate(event);
        break;
      case "outcome":
        this.setStatus(event.status);
        this.showOutcome(event);
        break;
      case "status":
        if (event.stage === "run" && (TERMINAL.has(event.code) || event.code === "waiting")) {
          this.setStatus(event.code);
        } else if (event.stage === "run" && (event.code === "started" || event.code === "resumed")) {
          this.setStatus("running");
        }
        break;
      case "end":
        this.ended = true;
        announce(`The run ended: ${event.status || "finished"}.`);
        if (event.status) this.setStatus(event.status);
        this.scheduleRefresh();
        runsChanged();
        break;
      default:
        break;
    }
  }

  setStatus(status) {
    if (!status || status === this.status) return;
    this.status = status;
    replace($("run-status"), badge(status));
    $("run-cancel").hidden = TERMINAL.has(status);
    // an ended run's open question expired with it
    if (TERMINAL.has(status)) this.showInteraction(null);
  }

  showOutcome(outcome) {
    const status = outcome.status || "";
    const message = outcome.user_message || outcome.reason || "";
    replace(
      $("outcome"),
      h(
        "section",
        { class: `outcome-panel status-${status}`, "aria-label": "Outcome" },
        h("strong", { text: "Outcome " }),
        badge(status),
        message ? h("span", { class: "outcome-message", text: ` ${message}` }) : null,
        outcome.code ? h("small", { class: "muted", text: ` (${[outcome.stage, outcome.code].filter(Boolean).join(" · ")})` }) : null,
        outcome.usage ? h("p", { class: "outcome-usage", "aria-label": "Usage", text: usageText(outcome.usage) }) : null,
      ),
    );
  }

  showInteraction(interaction) {
    if (interaction && this.interaction && interaction.id === this.interaction.id) return;
    this.interaction = interaction;
    if (!interaction) {
      replace($("interaction"));
      return;
    }
    const toolSpec = interaction.tool ? catalog.tools.get(interaction.tool.name) || null : null;
    let origin = null;
    if (interaction.runId && this.id && interaction.runId !== this.id) {
      const child = this.subRuns.find((run) => run.id === interaction.runId);
      const step = stepOf(this.id, interaction.runId);
      const label = child && child.kind === "agent" && step ? `the agent of step ${step}` : runLabel(child || { id: interaction.runId });
      origin = { runId: interaction.runId, label };
    }
    const card = interactionCard(interaction, {
      toolSpec,
      origin,
      resolve: (body) => this.resolve(interaction, body),
    });
    replace($("interaction"), card);
  }

  async resolve(interaction, body) {
    try {
      await api("POST", `/v1/interactions/${encodeURIComponent(interaction.id)}`, body);
    } catch (error) {
      if (error.status === 409) {
        this.scheduleRefresh();
        throw new Error(`${error.message} — this request was already answered or is out of date; the page is being refreshed.`);
      }
      throw error;
    }
    const done = { approve: "Approved.", reject: "Rejected.", answer: "Answer sent.", edit: "Approved with your changes." };
    const said = done[body.kind] || "Sent.";
    announce(said);
    if (this.interaction && this.interaction.id === interaction.id) this.showInteraction(null);
    // the answer is in: say so where the card was, until the run's next wait (or its end) takes its place
    replace($("interaction"), h("p", { class: "answered-note muted", role: "status", text: `${said} The run goes on…` }));
    if (!TERMINAL.has(this.status)) this.setStatus("running");
    // the stream may have stopped while the run waited; pick it up again where it left off
    this.follow(this.lastSeq);
    runsChanged();
  }

  async cancel() {
    if (!this.id) return;
    const button = $("run-cancel");
    // a cancel cannot be undone: the first click only arms the button for a few seconds
    if (button.dataset.armed !== "yes") {
      button.dataset.armed = "yes";
      button.textContent = "Click again to cancel";
      clearTimeout(this.disarmTimer);
      this.disarmTimer = setTimeout(() => this.disarmCancel(), 4000);
      return;
    }
    this.disarmCancel();
    button.disabled = true;
    try {
      await api("POST", `/v1/runs/${encodeURIComponent(this.id)}/cancel`);
      announce("Run cancelled.");
      this.scheduleRefresh();
      this.follow(this.lastSeq);
      runsChanged();
    } catch (error) {
      showError(error);
    } finally {
      button.disabled = false;
    }
  }

  disarmCancel() {
    clearTimeout(this.disarmTimer);
    const button = $("run-cancel");
    button.dataset.armed = "";
    button.textContent = "Cancel run";
  }
}
