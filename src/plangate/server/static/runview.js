// The page of one run: its header and status, the open interaction at the top, the outcome, a formula
// run's steps as a DAG, and the timeline, all kept live from the run's event stream.

import { api, followEvents } from "./api.js";
import { StepGraph } from "./dag.js";
import { badge, clock, h, replace } from "./dom.js";
import { interactionCard, normalizeInteraction } from "./interaction.js";
import { $, TERMINAL, announce, runsChanged, showError } from "./page.js";
import { catalog } from "./start.js";
import { Timeline } from "./timeline.js";

export function currentRunId() {
  const match = location.hash.match(/^#\/runs\/([^/?]+)/);
  return match ? decodeURIComponent(match[1]) : null;
}

export class RunView {
  constructor() {
    this.run = null;
    this.controller = null;
    this.timeline = new Timeline($("timeline"));
    this.graph = new StepGraph($("steps"));
    this.interaction = null;
    this.refreshTimer = null;
    this.following = false;
    this.lastSeq = 0;
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
    this.timeline.reset();
    replace($("run-status"));
    this.graph.setSteps({});
    replace($("interaction"));
    replace($("outcome"));
    $("steps-section").hidden = true;
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
    this.run = doc.run;
    const run = doc.run;
    this.timeline.runKind = run.kind;
    $("run-title").textContent = run.name || run.id;
    $("run-meta").textContent = `${run.kind} run ${run.id} · started ${clock(run.created_at)}`;
    this.setStatus(run.status);
    this.showInteraction(normalizeInteraction(doc.interaction, run.kind));
    if (run.outcome) this.showOutcome(run.outcome);
    if (doc.steps && Object.keys(doc.steps).length) {
      $("steps-section").hidden = false;
      this.graph.setSteps(doc.steps);
    }
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
    switch (type) {
      case "interaction_opened":
        this.setStatus("waiting");
        this.showInteraction(normalizeInteraction(event, this.run ? this.run.kind : ""));
        announce(`The run is waiting for you: ${event.prompt || ""}`);
        break;
      case "interaction_resolved":
        if (this.interaction && this.interaction.id === event.interaction_id) this.showInteraction(null);
        if (!TERMINAL.has(this.status)) this.setStatus("running");
        break;
      case "step_state":
        $("steps-section").hidden = false;
        if (this.graph.stepState(event)) this.scheduleRefresh();
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
    const card = interactionCard(interaction, { toolSpec, resolve: (body) => this.resolve(interaction, body) });
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
    announce(done[body.kind] || "Sent.");
    if (this.interaction && this.interaction.id === interaction.id) this.showInteraction(null);
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
