// A run's timeline: one list item per event worth reading, in arrival order. Speak and thinking deltas are
// joined into one block of text; a tool result is attached to the call it answers.

import { badge, clock, h, pretty, replace } from "./dom.js";

const TERMINAL = new Set(["completed", "failed", "aborted", "exhausted", "cancelled"]);

const RESOLUTION_TEXT = {
  approve: "approved",
  reject: "rejected",
  answer: "answered",
  edit: "approved with edited arguments",
};

export class Timeline {
  constructor(list) {
    this.list = list;
    this.onFork = null; // (body) => …: the run view's "fork from here" / "retry from this step"
    this.reset();
  }

  reset() {
    this.list.replaceChildren();
    this.runKind = "";
    this.calls = new Map();
    this.open = null; // the speak/thinking block that the next delta of the same type extends
    this.seen = new Set();
  }

  /** Add one event (`type` from the stream, `data` the event's JSON). Repeated seqs are ignored. */
  add(type, data) {
    const event = data || {};
    if (typeof event.seq === "number") {
      if (this.seen.has(event.seq)) return;
      this.seen.add(event.seq);
    }
    // the end of the stream is shown by the live indicator, and the outcome already said how it ended
    if (type === "heartbeat" || type === "end") return;
    if (type === "speak" || type === "thinking") {
      this.delta(type, event);
      return;
    }
    this.open = null;
    // every run ends with an outcome event; a formula's run-level status just before it says the same
    if (type === "status" && event.stage === "run" && TERMINAL.has(event.code)) return;
    const render = RENDERERS[type];
    const item = render ? render.call(this, event) : generic(type, event);
    if (item) this.push(type, event, item);
  }

  push(type, event, body, extra = "") {
    const item = h(
      "li",
      { class: `event event-${type} ${extra}`.trim(), dataset: { type, seq: event.seq ?? "" } },
      h("span", { class: "when", text: clock(event.at) }),
      h("div", { class: "what" }, body),
    );
    this.list.append(item);
    return item;
  }

  /** A "fork from here" / "retry from this step" button, when the run view handles them. */
  forkButton(text, title, body) {
    if (!this.onFork) return null;
    const wanted = "at_round" in body ? "agent" : "formula";
    if (this.runKind !== wanted) return null;
    return [" ", h("button", { type: "button", class: "fork", text, title, onclick: () => this.onFork(body) })];
  }

  delta(type, event) {
    if (this.open && this.open.type === type) {
      this.open.text.textContent += event.text || "";
      return;
    }
    const text = h("span", { class: "text", text: event.text || "" });
    const body =
      type === "speak"
        ? h("p", { class: "speech" }, text)
        : h("details", { class: "thinking" }, h("summary", { text: "Reasoning" }), h("p", {}, text));
    this.push(type, event, body);
    this.open = { type, text };
  }
}

// a formula step that ended may be retried from (a new run: it and its downstream run again)
const RETRIABLE = new Set(["complete", "failed"]);

function stepName(stepId, runKind) {
  // an agent's interactions name the plan step by its index; people count from 1
  if (runKind === "agent" && /^\d+$/.test(String(stepId))) return `plan step ${Number(stepId) + 1}`;
  return `step ${stepId}`;
}

function label(text) {
  return h("strong", { class: "label", text });
}

function jsonBlock(value, summary, { inline = true } = {}) {
  if (value === undefined || value === null) return null;
  const text = pretty(value);
  if (inline && text.length <= 100 && !text.includes("\n")) return h("code", { class: "inline-json", text });
  return h("details", { class: "json" }, h("summary", { text: summary || "details" }), h("pre", { text }));
}

function generic(type, event) {
  const { run_id: _r, seq: _s, at: _a, type: _t, ...rest } = event;
  return [label(type), " ", jsonBlock(rest, "details")];
}

const RENDERERS = {
  status(event) {
    const words = [event.stage, event.code].filter(Boolean).join(" · ");
    return [label("Status"), " ", h("span", { class: "stage", text: words }), event.text ? ` — ${event.text}` : ""];
  },
  plan(event) {
    const steps = Array.isArray(event.steps) ? event.steps : [];
    return [
      label("Plan"),
      h(
        "ol",
        { class: "plan" },
        steps.map((step) =>
          h("li", {}, step.content, step.done_when ? h("small", { class: "done-when", text: ` done when: ${step.done_when}` }) : null),
        ),
      ),
    ];
  },
  step_started(event) {
    return [label(`Step ${Number(event.step_index) + 1}`), " started: ", event.content];
  },
  step_advanced(event) {
    return [
      label("Step done"),
      ` ${Number(event.from_index) + 1} → ${Number(event.to_index) + 1}`,
      event.goal_check ? ` — ${event.goal_check}` : "",
    ];
  },
  tool_call(event) {
    const result = h("div", { class: "result pending", text: "running…" });
    const body = [
      label("Tool call"),
      " ",
      h("code", { class: "tool-name", text: event.tool }),
      event.step_id ? h("small", { text: ` (${stepName(event.step_id, this.runKind)})` }) : null,
      " ",
      jsonBlock(event.arguments, "arguments"),
      result,
    ];
    if (event.call_id) this.calls.set(event.call_id, result);
    return body;
  },
  tool_result(event) {
    const target = event.call_id ? this.calls.get(event.call_id) : null;
    const content = [
      h("span", { class: event.success ? "ok" : "bad", text: event.success ? "✓ " : "✗ " }),
      h("span", { text: `${event.status || ""}${event.summary ? `: ${event.summary}` : ""}` }),
      event.error_message ? h("span", { class: "bad", text: ` — ${event.error_code || "error"}: ${event.error_message}` }) : null,
      " ",
      jsonBlock(event.observation, "observation"),
    ];
    if (target) {
      target.className = `result ${event.success ? "success" : "failure"}`;
      replace(target, content);
      return null;
    }
    return [label("Tool result"), " ", h("code", { class: "tool-name", text: event.tool }), " ", content];
  },
  interaction_opened(event) {
    const what = { ask_user: "Question", confirm: "Confirmation asked", plan_consent: "Plan needs consent", approval: "Approval asked" };
    return [
      label(what[event.kind] || "Waiting for a person"),
      event.step_id ? h("small", { text: ` (${stepName(event.step_id, this.runKind)})` }) : null,
      ": ",
      event.prompt,
      event.tool ? [" ", h("code", { class: "tool-name", text: event.tool.name }), " ", jsonBlock(event.tool.arguments, "arguments")] : null,
    ];
  },
  interaction_resolved(event) {
    const verb = RESOLUTION_TEXT[event.resolution] || event.resolution;
    return [label("Resolved"), ` ${verb}`, event.by ? ` by ${event.by}` : ""];
  },
  correction(event) {
    return [label("Correction"), " ", h("code", { text: event.code }), ` ${event.message || ""}`];
  },
  round(event) {
    const decision = event.decision || {};
    const call = decision.tool_call && typeof decision.tool_call === "object" ? decision.tool_call : null;
    const validation = event.validation || {};
    const checks = ["flow", "evidence", "safety"];
    const failed = checks.filter((check) => validation[`${check}_passed`] === false);
    const notes = checks.map((check) => validation[`${check}_reason`]).filter(Boolean);
    return [
      label(`Round ${event.round}`),
      event.step_index !== null && event.step_index !== undefined ? h("small", { text: ` (step ${Number(event.step_index) + 1})` }) : null,
      " ",
      h("span", { class: "decision", text: decision.action || "?" }),
      call ? [" ", h("code", { class: "tool-name", text: call.name })] : null,
      decision.reason ? ` — ${decision.reason}` : "",
      failed.length ? h("span", { class: "bad", text: ` ${failed.join(" and ")} check failed` }) : null,
      notes.length ? h("small", { class: "round-notes", text: ` — ${notes.join("; ")}` }) : null,
      this.forkButton("Fork from here", `Fork this run before round ${event.round}`, { at_round: event.round }),
      jsonBlock({ decision: event.decision, validation: event.validation, result: event.result }, "decision", { inline: false }),
    ];
  },
  outcome(event) {
    return [
      label("Outcome"),
      " ",
      badge(event.status),
      event.user_message ? h("p", { class: "outcome-message", text: event.user_message }) : null,
      h("small", { class: "outcome-code", text: [event.stage, event.code].filter(Boolean).join(" · ") }),
    ];
  },
  step_state(event) {
    return [
      label("Step"),
      " ",
      h("code", { text: event.step_id }),
      " ",
      badge(event.status),
      event.attempt > 1 ? h("small", { text: ` attempt ${event.attempt}` }) : null,
      event.reason ? ` ${event.reason}` : "",
      RETRIABLE.has(event.status)
        ? this.forkButton("Retry from this step", `Retry this run from step ${event.step_id}`, { from_step: event.step_id })
        : null,
      event.output ? jsonBlock(event.output, "output", { inline: false }) : null,
    ];
  },
  gate(event) {
    return [
      label("Gate"),
      " ",
      h("code", { text: event.step_id }),
      h("span", { class: event.satisfied ? "ok" : "waiting", text: event.satisfied ? " open" : " closed" }),
      event.reason ? ` — ${event.reason}` : "",
    ];
  },
  review(event) {
    return [label("Review"), ` ${event.verdict || ""} `, jsonBlock(event.signals, "signals")];
  },
  op(event) {
    const op = event.op || {};
    return [label("Op"), " ", h("code", { text: op.op || "" }), " ", jsonBlock(op, "op")];
  },
};
