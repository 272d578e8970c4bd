// The open interaction of a run, as a card at the top of the run page: approve, reject with a reason, edit
// the call's arguments (a form from the tool's JSON schema), or answer a question. A question asked inside
// the run (by an agent step's agent, by a sub-run) shows on the run too, with a link to the run that asks.

import { h, pretty, uid } from "./dom.js";
import { argumentsForm } from "./schemaform.js";

const HEADINGS = {
  ask_user: "The run asks you a question",
  confirm: "The run asks you to confirm",
  plan_consent: "The run asks you to approve its plan",
  approval: "The run needs your approval",
};

/** The interaction from a run document or an interaction_opened event, in one shape. */
export function normalizeInteraction(source, runKind = "") {
  if (!source) return null;
  const id = source.interaction_id || source.id;
  if (!id) return null;
  return {
    id,
    kind: source.kind || "approval",
    prompt: source.prompt || "",
    tool: source.tool || null,
    stepId: source.step_id || null,
    runId: source.run_id || null,
    runKind,
  };
}

/**
 * A question asked inside the run on the page (an agent step's agent, a sub-run): which run asks, linked,
 * so that it can be answered here (one place) or there. `origin` is {runId, label} or null.
 */
function originLine(origin) {
  if (!origin) return null;
  return h(
    "p",
    { class: "card-origin" },
    "Asked inside this run by ",
    h("a", { href: `#/runs/${encodeURIComponent(origin.runId)}`, class: "origin-link", text: origin.label }),
    ": answer it here or on its own page.",
  );
}

/** Which step asks: a formula step's id, or an agent's plan step (its index, counted from 1 for people). */
function stepLine(interaction) {
  if (!interaction.stepId) return null;
  if (interaction.runKind === "agent" && /^\d+$/.test(interaction.stepId)) {
    return h("p", { class: "card-step", text: `Plan step ${Number(interaction.stepId) + 1}` });
  }
  return h("p", { class: "card-step" }, "Step ", h("code", { text: interaction.stepId }));
}

/**
 * Build the card. `toolSpec` is the tool's entry from /v1/tools (or null); `resolve(body)` sends the
 * resolution and resolves when the server accepted it (it rejects with an Error whose message is shown).
 */
export function interactionCard(interaction, { toolSpec, resolve, origin = null }) {
  const headingId = uid("interaction");
  const error = h("p", { class: "card-error", role: "alert" });
  const buttons = [];

  async function send(body, button) {
    error.textContent = "";
    for (const b of buttons) b.disabled = true;
    const previous = button.textContent;
    button.textContent = "Sending…";
    try {
      await resolve(body);
    } catch (problem) {
      error.textContent = problem.message;
      for (const b of buttons) b.disabled = false;
      button.textContent = previous;
    }
  }

  function button(text, className, onclick) {
    const el = h("button", { type: "button", class: className, text, onclick: () => onclick(el) });
    buttons.push(el);
    return el;
  }

  const parts = [
    h("h2", { id: headingId, text: HEADINGS[interaction.kind] || "The run is waiting for you" }),
    originLine(origin),
    stepLine(interaction),
    h("p", { class: "prompt", text: interaction.prompt }),
  ];

  if (interaction.tool) {
    const effect = toolSpec && toolSpec.effect ? ` (${toolSpec.effect})` : "";
    parts.push(
      h(
        "div",
        { class: "card-call" },
        h("p", {}, "Tool ", h("code", { class: "tool-name", text: interaction.tool.name }), effect, " with arguments:"),
        h("pre", { class: "arguments", text: pretty(interaction.tool.arguments || {}) }),
      ),
    );
  }

  if (interaction.kind === "ask_user") {
    const answerId = uid("answer");
    const answer = h("textarea", { id: answerId, rows: 3, required: true });
    const sendButton = button("Send answer", "primary", (el) => {
      if (!answer.value.trim()) {
        error.textContent = "Write an answer first.";
        answer.focus();
        return;
      }
      send({ kind: "answer", text: answer.value }, el);
    });
    parts.push(
      h("div", { class: "field" }, h("label", { for: answerId, text: "Your answer" }), answer),
      h("div", { class: "actions" }, sendButton),
    );
  } else {
    const reasonId = uid("reason");
    const reason = h("input", { id: reasonId, type: "text", placeholder: "why not (told to the run)" });
    const approve = button("Approve", "primary", (el) => send({ kind: "approve" }, el));
    const reject = button("Reject", "danger", (el) => {
      const body = { kind: "reject" };
      if (reason.value.trim()) body.reason = reason.value.trim();
      send(body, el);
    });
    const row = [approve];
    let editor = null;
    if (interaction.tool) {
      const form = argumentsForm(toolSpec ? toolSpec.parameters : null, interaction.tool.arguments || {});
      const approveEdited = button("Approve with these arguments", "primary", (el) => {
        let args;
        try {
          args = form.read();
        } catch (problem) {
          error.textContent = problem.message;
          return;
        }
        send({ kind: "edit", arguments: args }, el);
      });
      const editorId = uid("editor");
      editor = h(
        "fieldset",
        { class: "editor", id: editorId, hidden: true },
        h("legend", { text: `Edit the arguments of ${interaction.tool.name}` }),
        form.element,
        h("div", { class: "actions" }, approveEdited),
      );
      const toggle = button("Edit arguments", "secondary", () => {
        editor.hidden = !editor.hidden;
        toggle.setAttribute("aria-expanded", String(!editor.hidden));
        if (!editor.hidden) editor.querySelector("input, select, textarea")?.focus();
      });
      toggle.setAttribute("aria-expanded", "false");
      toggle.setAttribute("aria-controls", editorId);
      row.push(toggle);
    }
    parts.push(
      h("div", { class: "actions" }, row),
      editor,
      h(
        "div",
        { class: "reject-row" },
        h("label", { for: reasonId, text: "Reason for rejecting (optional)" }),
        reason,
        reject,
      ),
    );
  }
  parts.push(error);
  return h(
    "section",
    { class: `interaction kind-${interaction.kind}`, "aria-labelledby": headingId, dataset: { interaction: interaction.id } },
    parts,
  );
}
