// A formula run's steps as a layered DAG: one column per depth (a step sits one column right of its
// deepest need), each step a card with its state colour, its reason and its gate's last verdict; edges are
// drawn in an SVG behind the cards. Updated in place from step_state and gate events.

import { badge, h, replace } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";

export class StepGraph {
  constructor(container) {
    this.container = container;
    this.steps = new Map(); // id -> {status, reason, attempt, title, needs, gate: {satisfied, reason}|null, wait}
    this.order = [];
    this.resizeObserver = new ResizeObserver(() => this.drawEdges());
  }

  get empty() {
    return this.steps.size === 0;
  }

  /**
   * Replace the steps with the run's `steps`: a list of {id, title, needs, executor, status, reason, ...}
   * (an object keyed by id is read the same way).
   */
  setSteps(steps) {
    const old = this.steps;
    this.steps = new Map();
    this.order = [];
    const entries = Array.isArray(steps)
      ? steps.filter((info) => info && info.id).map((info) => [info.id, info])
      : Object.entries(steps || {});
    for (const [id, info] of entries) {
      const previous = old.get(id);
      this.order.push(id);
      this.steps.set(id, {
        status: info.status || "pending",
        reason: info.reason || "",
        attempt: info.attempt || 0,
        title: info.title && info.title !== id ? info.title : previous?.title || "",
        needs: Array.isArray(info.needs) ? info.needs : previous?.needs || [],
        executor: info.executor || previous?.executor || "",
        gate: previous?.gate || null,
        wait: info.wait || null,
      });
    }
    this.render();
  }

  /** Apply a step_state event; an unknown step is added (a loop may grow the plan). */
  stepState(event) {
    let step = this.steps.get(event.step_id);
    const added = !step;
    if (added) {
      step = { status: "pending", reason: "", attempt: 0, title: "", needs: [], executor: "", gate: null, wait: null };
      this.steps.set(event.step_id, step);
      this.order.push(event.step_id);
    }
    step.status = event.status;
    step.reason = event.reason || "";
    step.attempt = event.attempt || step.attempt;
    step.wait = event.wait || null;
    if (added) this.render();
    else this.renderStep(event.step_id);
    return added;
  }

  /** Apply a gate event. */
  gate(event) {
    const step = this.steps.get(event.step_id);
    if (!step) return;
    step.gate = { satisfied: Boolean(event.satisfied), reason: event.reason || "" };
    this.renderStep(event.step_id);
  }

  depths() {
    const depth = new Map();
    const visiting = new Set();
    const of = (id) => {
      if (depth.has(id)) return depth.get(id);
      if (visiting.has(id)) return 0; // a cycle cannot come from a checked formula; don't hang on one
      visiting.add(id);
      const needs = (this.steps.get(id)?.needs || []).filter((n) => this.steps.has(n));
      const d = needs.length ? 1 + Math.max(...needs.map(of)) : 0;
      visiting.delete(id);
      depth.set(id, d);
      return d;
    };
    for (const id of this.order) of(id);
    return depth;
  }

  render() {
    this.resizeObserver.disconnect();
    if (this.empty) {
      this.container.replaceChildren();
      return;
    }
    const depth = this.depths();
    const layers = [];
    for (const id of this.order) {
      const d = depth.get(id) || 0;
      (layers[d] ||= []).push(id);
    }
    this.svg = document.createElementNS(SVG, "svg");
    this.svg.setAttribute("class", "edges");
    this.svg.setAttribute("aria-hidden", "true");
    this.cards = new Map();
    const columns = layers.map((ids, d) =>
      h(
        "li",
        { class: "layer" },
        h("h4", { class: "layer-name", text: d === 0 ? "First" : `Then (${d})` }),
        h("ol", { class: "layer-steps" }, ids.map((id) => this.card(id))),
      ),
    );
    const list = h("ol", { class: "dag-layers", "aria-label": "Steps by depth" }, columns);
    this.container.replaceChildren(h("div", { class: "dag-canvas" }, this.svg, list));
    this.resizeObserver.observe(this.container);
    requestAnimationFrame(() => this.drawEdges());
  }

  card(id) {
    const item = h("li", { class: "step", dataset: { step: id } });
    this.cards.set(id, item);
    this.fillCard(id, item);
    return item;
  }

  renderStep(id) {
    const item = this.cards?.get(id);
    if (item) this.fillCard(id, item);
    // edges take the colour of the step they leave, and a card's height may have changed
    requestAnimationFrame(() => this.drawEdges());
  }

  fillCard(id, item) {
    const step = this.steps.get(id);
    item.dataset.status = step.status;
    item.className = `step status-${step.status}`;
    const gate = step.gate;
    const waitKind = step.status === "waiting" && step.wait && step.wait.kind ? `waiting for ${step.wait.kind}` : "";
    replace(
      item,
      h("div", { class: "step-head" }, h("code", { class: "step-id", text: id }), badge(step.status)),
      step.title ? h("div", { class: "step-title", text: step.title }) : null,
      step.executor ? h("small", { class: "executor", text: step.executor }) : null,
      step.needs.length ? h("small", { class: "needs", text: `after ${step.needs.join(", ")}` }) : null,
      step.reason || waitKind ? h("div", { class: "step-reason", title: step.reason || waitKind, text: step.reason || waitKind }) : null,
      step.attempt > 1 ? h("small", { class: "attempt", text: `attempt ${step.attempt}` }) : null,
      gate
        ? h("div", { class: `gate ${gate.satisfied ? "gate-open" : "gate-closed"}`, dataset: { gate: gate.satisfied ? "open" : "closed" } },
            h("span", { text: gate.satisfied ? "gate open" : "gate closed" }),
            gate.reason ? h("span", { class: "gate-reason", text: `: ${gate.reason}` }) : null)
        : null,
    );
  }

  drawEdges() {
    if (!this.svg || !this.svg.isConnected) return;
    const canvas = this.svg.parentElement;
    const box = canvas.getBoundingClientRect();
    this.svg.setAttribute("width", String(canvas.scrollWidth));
    this.svg.setAttribute("height", String(canvas.scrollHeight));
    const paths = [];
    for (const [id, step] of this.steps) {
      const to = this.cards.get(id);
      for (const need of step.needs) {
        const from = this.cards.get(need);
        if (!from || !to) continue;
        const a = from.getBoundingClientRect();
        const b = to.getBoundingClientRect();
        const x1 = a.right - box.left;
        const y1 = a.top + a.height / 2 - box.top;
        const x2 = b.left - box.left;
        const y2 = b.top + b.height / 2 - box.top;
        const bend = Math.max(20, (x2 - x1) / 2);
        const path = document.createElementNS(SVG, "path");
        path.setAttribute("d", `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`);
        path.setAttribute("class", `edge from-${this.steps.get(need)?.status || "pending"}`);
        paths.push(path);
      }
    }
    this.svg.replaceChildren(...paths);
  }

  dispose() {
    this.resizeObserver.disconnect();
  }
}
