// The console's "Ask" view: a chat with a conversation's copilot turns. Each turn shows the workflow as the
// copilot builds it (the DAG view of dag.js, fed by the turn's `op` events, then by its formula run's
// `step_state` events), the review's signals, the answer, the rows it rests on as a table and, when they are
// a series, as a chart, and what its model calls used and cost; a finished turn can be retried. The turn
// runs on the server: this page only starts it and watches its run's events, so closing the page loses
// nothing. Routes: #/ask (a new conversation), #/ask/<conversation id>.

import { api, followEvents } from "./api.js";
import { drawChart } from "./askchart.js";
import { StepGraph } from "./dag.js";
import { badge, clock, h, replace, usageText } from "./dom.js";
import { $, announce, itemsOf, showError } from "./page.js";

const ROWS_SHOWN = 50;
const TURN_STATUSES = new Set(["done", "partial", "unusable", "failed", "cancelled"]);

/** The conversation the hash names: undefined when the page is not on the Ask view, null for a new one. */
export function askRoute() {
  const match = location.hash.match(/^#\/ask(?:\/([^/?]+))?\/?$/);
  if (!match) return undefined;
  return match[1] ? decodeURIComponent(match[1]) : null;
}

function executorOf(step) {
  for (const kind of ["tool", "llm", "agent", "human", "formula"]) {
    if (step[kind]) return kind === "tool" && step.tool.name ? step.tool.name : kind;
  }
  return "";
}

function titleOf(step) {
  if (step.title && step.title !== step.id) return step.title;
  if (step.tool && step.tool.args && step.tool.args.table) return `${step.tool.name} on ${step.tool.args.table}`;
  return "";
}

/** A formula's steps ({id, needs, tool | llm | …}) as the DAG view draws them, all in `status`. */
function graphSteps(steps, status) {
  return (steps || [])
    .filter((step) => step && step.id)
    .map((step) => ({
      id: step.id,
      title: titleOf(step),
      needs: step.needs || step.depends_on || [],
      executor: executorOf(step),
      status,
    }));
}

function resultTable(result) {
  const columns = result.columns || [];
  const rows = result.rows || [];
  if (!columns.length) return null;
  const cell = (value) => (value === null || value === undefined ? "NULL" : typeof value === "number" ? value.toLocaleString() : String(value));
  return h(
    "div",
    { class: "result-scroll" },
    h(
      "table",
      { class: "result-table" },
      h("caption", { class: "muted", text: rows.length > ROWS_SHOWN ? `First ${ROWS_SHOWN} of ${rows.length} rows` : `${rows.length} row${rows.length === 1 ? "" : "s"}` }),
      h("thead", {}, h("tr", {}, columns.map((name) => h("th", { scope: "col", text: name })))),
      h(
        "tbody",
        {},
        rows.slice(0, ROWS_SHOWN).map((row) => h("tr", {}, row.map((value) => h("td", { class: typeof value === "number" ? "num" : null, text: cell(value) })))),
      ),
    ),
  );
}

function signalList(attempts) {
  const items = [];
  for (const attempt of attempts || []) {
    const signals = (attempt.review && attempt.review.signals) || attempt.signals || [];
    for (const signal of signals) {
      items.push(
        h(
          "li",
          { class: `signal severity-${signal.severity}`, dataset: { kind: signal.kind, severity: signal.severity } },
          h("span", { class: "signal-kind", text: signal.kind }),
          h("small", { class: "muted", text: ` ${signal.severity} · attempt ${attempt.n}` }),
          h("div", { class: "signal-detail", text: signal.detail }),
        ),
      );
    }
  }
  if (!items.length) return null;
  return h("section", { class: "signals", "aria-label": "Review signals" }, h("h4", { text: "Review" }), h("ul", {}, items));
}

/** One turn in the chat: built from the stored turn, or live from its run's events. */
class TurnCard {
  constructor(view, turn) {
    this.view = view;
    this.turn = turn;
    this.controller = null;
    this.childRun = null;
    this.childController = null;
    this.attempt = 0;
    this.draft = new Map();
    this.liveSignals = [];
    this.graphBox = h("div", { class: "turn-graph" });
    this.graph = new StepGraph(this.graphBox);
    this.progress = h("p", { class: "turn-progress muted", "aria-live": "polite" });
    this.body = h("div", { class: "turn-body" });
    this.el = h(
      "li",
      { class: "turn", dataset: { turn: turn.id, status: turn.status } },
      h("div", { class: "bubble question" }, h("strong", { text: "You" }), h("p", { class: "question-text", text: turn.question })),
      h(
        "div",
        { class: "bubble reply" },
        h("div", { class: "turn-head" }, h("strong", { text: "Copilot" }), h("span", { class: "turn-status" }), h("small", { class: "muted turn-meta" })),
        this.progress,
        h("section", { class: "turn-formula", "aria-label": "Workflow" }, h("h4", { text: "Workflow" }), this.graphBox),
        this.body,
      ),
    );
    this.render();
  }

  get running() {
    return !TURN_STATUSES.has(this.turn.status);
  }

  dispose() {
    if (this.controller) this.controller.abort();
    if (this.childController) this.childController.abort();
    this.graph.dispose();
  }

  render() {
    const turn = this.turn;
    this.el.dataset.status = turn.status;
    replace(this.el.querySelector(".turn-status"), badge(turn.status));
    replace(this.el.querySelector(".turn-meta"), ` ${turn.source || ""} · ${clock(turn.created_at)}`);
    if (this.running) {
      replace(this.body, signalList(this.liveAttempts()));
      return;
    }
    this.progress.textContent = "";
    const result = turn.result || { columns: [], rows: [] };
    const chartBox = turn.chart ? h("div", { class: "ask-chart" }) : null;
    // How sure the turn is sits beside the figure it qualifies, not under it: a reader who stops at the
    // number still sees that it is partial, and why.
    const doubt = turn.status !== "done" && turn.reason
      ? h("p", { class: `turn-reason status-${turn.status}`, id: `reason-${turn.id}`, role: "note", text: turn.reason })
      : null;
    const answer = turn.answer
      ? h("div", { class: "answer", text: turn.answer, ...(doubt ? { "aria-describedby": `reason-${turn.id}` } : {}) })
      : null;
    replace(
      this.body,
      answer || doubt ? h("div", { class: "answer-row" }, answer, doubt) : null,
      signalList(turn.attempts),
      chartBox ? h("section", { class: "turn-chart", "aria-label": "Chart" }, chartBox) : null,
      result.columns && result.columns.length ? h("section", { class: "turn-result", "aria-label": "Result rows" }, resultTable(result)) : null,
      // what the turn's model calls used and cost: its generation, its review and its formula runs'
      turn.usage ? h("p", { class: "turn-usage muted", "aria-label": "Usage", text: usageText(turn.usage) }) : null,
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", class: "secondary retry", text: "Retry this turn", onclick: (event) => this.retry(event.target) }),
        h("small", { class: "muted", text: `${(turn.attempts || []).length} attempt${(turn.attempts || []).length === 1 ? "" : "s"}` }),
      ),
    );
    if (chartBox) requestAnimationFrame(() => chartBox.isConnected && drawChart(chartBox, result, turn.chart));
    this.showFinalSteps();
  }

  liveAttempts() {
    const stored = this.turn.attempts || [];
    const seen = new Set(stored.map((attempt) => attempt.n));
    return [...stored, ...this.liveSignals.filter((attempt) => !seen.has(attempt.n))];
  }

  /** The steps of the formula the answer came from, in the states its run left them. */
  async showFinalSteps() {
    const attempts = this.turn.attempts || [];
    const ran = [...attempts].reverse().find((attempt) => attempt.run_id);
    if (ran) {
      try {
        const doc = await api("GET", `/v1/runs/${encodeURIComponent(ran.run_id)}`);
        if (doc.steps && doc.steps.length) {
          this.graph.setSteps(doc.steps);
          return;
        }
      } catch (error) {
        if (error.status !== 404) showError(error);
      }
    }
    const formula = this.turn.formula || [...attempts].reverse().find((attempt) => attempt.formula)?.formula;
    this.graph.setSteps(graphSteps(formula ? formula.steps : [], "pending"));
  }

  // -- live ------------------------------------------------------------------------------------------------

  follow() {
    if (!this.running || this.controller) return;
    this.controller = new AbortController();
    const { signal } = this.controller;
    followEvents(this.turn.run_id, {
      signal,
      onEvent: (type, data) => this.onEvent(type, data || {}),
    }).catch((error) => {
      if (!signal.aborted) showError(error);
    });
  }

  onEvent(type, event) {
    if (type === "status") {
      const words = event.text || event.code || "";
      if (event.stage === "generate" && event.code === "attempt") this.newAttempt();
      this.progress.textContent = `${event.stage}: ${words}`;
      if (event.stage === "run" && event.code === "started") this.followChild();
    } else if (type === "op") {
      this.applyOp(event.op || {}, event.attempt);
    } else if (type === "review") {
      this.liveSignals.push({ n: event.attempt || this.attempt, review: { signals: event.signals || [] } });
      this.render();
    } else if (type === "end") {
      this.finished();
    }
  }

  newAttempt() {
    this.attempt += 1;
    this.draft = new Map();
    this.graph.setSteps([]);
  }

  applyOp(op, attempt) {
    if (op.error) return; // an op the copilot refused changed nothing
    if (attempt && attempt !== this.attempt) this.attempt = attempt;
    const name = op.op;
    if (name === "plan" && op.summary) this.progress.textContent = `plan: ${op.summary}`;
    if (name === "add_step" && op.step && op.step.id) this.draft.set(op.step.id, op.step);
    if (name === "update_step" && op.id && this.draft.has(op.id)) {
      const step = { ...this.draft.get(op.id) };
      for (const [key, value] of Object.entries(op)) {
        if (key === "op" || key === "id" || key === "attempt") continue;
        if (value === null) delete step[key];
        else step[key] = value;
      }
      this.draft.set(op.id, step);
    }
    if (name === "remove_step" && op.id) this.draft.delete(op.id);
    if (name === "final" && op.formula && Array.isArray(op.formula.steps)) {
      this.draft = new Map(op.formula.steps.map((step) => [step.id, step]));
    }
    if (["add_step", "update_step", "remove_step", "final"].includes(name)) {
      this.graph.setSteps(graphSteps([...this.draft.values()], "pending"));
    }
  }

  /** The formula run an attempt started: its step_state events move the DAG's cards. */
  async followChild() {
    let turn;
    try {
      turn = (await api("GET", `/v1/turns/${encodeURIComponent(this.turn.id)}`)).turn;
    } catch {
      return;
    }
    const runId = (turn.runs || [])[turn.runs.length - 1];
    if (!runId || runId === this.childRun) return;
    this.childRun = runId;
    if (this.childController) this.childController.abort();
    this.childController = new AbortController();
    const { signal } = this.childController;
    followEvents(runId, {
      signal,
      onEvent: (type, data) => {
        if (type === "step_state" && data) this.graph.stepState(data);
      },
    }).catch(() => {});
  }

  async finished() {
    if (this.controller) this.controller.abort();
    this.controller = null;
    try {
      this.turn = (await api("GET", `/v1/turns/${encodeURIComponent(this.turn.id)}`)).turn;
    } catch (error) {
      showError(error);
      return;
    }
    if (this.childController) this.childController.abort();
    this.render();
    announce(`The turn ended: ${this.turn.status}.`);
    this.view.turnEnded(this);
  }

  async retry(button) {
    button.disabled = true;
    try {
      const started = await api("POST", `/v1/turns/${encodeURIComponent(this.turn.id)}/retry`);
      this.view.addStarted(started, this.turn.question);
      announce("Asked again.");
    } catch (error) {
      showError(error);
    } finally {
      button.disabled = false;
    }
  }
}

export class AskView {
  constructor() {
    this.conversation = null;
    this.cards = [];
    this.loaded = false;
    this.generation = 0;
    $("ask-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.ask();
    });
    $("source-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.register();
    });
    $("ask-question").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        this.ask();
      }
    });
  }

  /** Show the conversation `id` (null: a new one). */
  async open(id) {
    if (this.loaded && id === this.conversation) return;
    this.loaded = true;
    this.close();
    this.conversation = id;
    const generation = ++this.generation;
    this.loadSources();
    this.loadConversations();
    $("chat-empty").hidden = Boolean(id);
    if (!id) return;
    let doc;
    try {
      doc = await api("GET", `/v1/conversations/${encodeURIComponent(id)}`);
    } catch (error) {
      showError(error);
      return;
    }
    if (generation !== this.generation) return;
    for (const turn of doc.turns || []) this.addCard(turn);
    const last = (doc.turns || [])[doc.turns.length - 1];
    if (last && last.source) $("ask-source").dataset.wanted = last.source;
    this.selectWanted();
  }

  close() {
    for (const card of this.cards) card.dispose();
    this.cards = [];
    replace($("chat"));
  }

  hide() {
    this.close();
    this.loaded = false;
    this.conversation = undefined;
  }

  addCard(turn) {
    const card = new TurnCard(this, turn);
    this.cards.push(card);
    $("chat").append(card.el);
    $("chat-empty").hidden = true;
    card.follow();
    return card;
  }

  addStarted(started, question) {
    const card = this.addCard({
      id: started.turn_id,
      run_id: started.run_id,
      conversation_id: started.conversation_id,
      question,
      status: "running",
      source: started.source,
      created_at: Date.now() / 1000,
      attempts: [],
      runs: [],
    });
    card.el.scrollIntoView({ block: "nearest" });
    if (started.conversation_id !== this.conversation) {
      // the first question starts the conversation: the address follows, the page stays as it is
      this.conversation = started.conversation_id;
      history.replaceState(null, "", `#/ask/${encodeURIComponent(started.conversation_id)}`);
    }
    this.loadConversations();
  }

  turnEnded() {
    this.loadConversations();
  }

  async ask() {
    const question = $("ask-question").value.trim();
    $("ask-error").textContent = "";
    if (!question) {
      $("ask-error").textContent = "Write a question first.";
      $("ask-question").focus();
      return;
    }
    const body = { question };
    if ($("ask-source").value) body.source = $("ask-source").value;
    if (this.conversation) body.conversation_id = this.conversation;
    const button = $("ask-submit");
    button.disabled = true;
    try {
      const started = await api("POST", "/v1/ask", body);
      $("ask-question").value = "";
      this.addStarted(started, question);
      announce("Question sent: the copilot is working on it.");
    } catch (error) {
      $("ask-error").textContent = error.message;
    } finally {
      button.disabled = false;
    }
  }

  async loadSources() {
    let items;
    try {
      items = itemsOf(await api("GET", "/v1/sources"));
    } catch (error) {
      if (error.status !== 401) showError(error);
      return;
    }
    replace(
      $("sources"),
      items.map((source) =>
        h(
          "li",
          { class: "source", dataset: { source: source.name } },
          h("code", { text: source.name }),
          h("small", { class: "muted", text: ` ${source.location} · ${source.tables} table${source.tables === 1 ? "" : "s"}` }),
        ),
      ),
    );
    const select = $("ask-source");
    const before = select.value;
    replace(select, items.map((source) => h("option", { value: source.name, text: source.name })));
    if (before && items.some((source) => source.name === before)) select.value = before;
    this.selectWanted();
  }

  selectWanted() {
    const select = $("ask-source");
    const wanted = select.dataset.wanted;
    if (wanted && [...select.options].some((option) => option.value === wanted)) select.value = wanted;
  }

  async loadConversations() {
    let items;
    try {
      items = itemsOf(await api("GET", "/v1/conversations?limit=50"));
    } catch (error) {
      if (error.status !== 401) showError(error);
      return;
    }
    $("conversations-empty").hidden = items.length > 0;
    replace(
      $("conversations"),
      items.map((item) =>
        h(
          "li",
          { class: item.id === this.conversation ? "run-item current" : "run-item", dataset: { conversation: item.id } },
          h(
            "a",
            { href: `#/ask/${encodeURIComponent(item.id)}`, "aria-current": item.id === this.conversation ? "page" : null },
            h("span", { class: "run-name", text: item.title || item.id }),
            h("small", { class: "run-sub", text: `${item.turns} turn${item.turns === 1 ? "" : "s"} · ${clock(item.updated_at)}` }),
          ),
        ),
      ),
    );
  }

  async register() {
    const data = $("source-data").value.trim();
    const name = $("source-name").value.trim();
    $("source-error").textContent = "";
    if (!data) {
      $("source-error").textContent = "Name a SQLite file or a postgresql:// URL.";
      return;
    }
    try {
      const created = await api("POST", "/v1/sources", name ? { data, name } : { data });
      $("source-data").value = "";
      $("source-name").value = "";
      $("ask-source").dataset.wanted = created.source.name;
      await this.loadSources();
      announce(`Registered ${created.source.name}.`);
    } catch (error) {
      $("source-error").textContent = error.message;
    }
  }
}
