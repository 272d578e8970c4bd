// The "Start a run" box: a formula run (its vars as fields built from the formula's var specs) or an agent
// run (prompt, model, mode, tools). Also keeps the catalogue of formulas and tools the server offers: a
// formula whose steps name tools the server lacks is listed, but cannot be chosen, and says why. A mistake
// in the form (a required var left empty, a var the server's check refuses) is shown next to its field.

import { api } from "./api.js";
import { h, replace, uid } from "./dom.js";
import { $, announce, clearError, itemsOf, runsChanged, showError } from "./page.js";

export const catalog = { formulas: [], tools: new Map() };

function selectTab(which) {
  for (const name of ["formula", "agent"]) {
    const selected = name === which;
    $(`tab-${name}`).setAttribute("aria-selected", String(selected));
    $(`tab-${name}`).tabIndex = selected ? 0 : -1;
    $(`${name}-form`).hidden = !selected;
  }
}

export async function loadFormulas() {
  const select = $("formula-name");
  try {
    catalog.formulas = itemsOf(await api("GET", "/v1/formulas"));
  } catch (error) {
    replace(select, h("option", { value: "", text: "Formulas unavailable" }));
    showError(error);
    return;
  }
  const current = select.value;
  replace(
    select,
    h("option", { value: "", text: catalog.formulas.length ? "Choose a formula…" : "No formulas on this server" }),
    catalog.formulas.map((f) => {
      if (f.error) return h("option", { value: f.name, disabled: true, text: `${f.name} (cannot be read: ${f.error})` });
      const missing = Array.isArray(f.missing_tools) ? f.missing_tools : [];
      if (missing.length) {
        const text = `${f.name} (cannot start here: this server lacks ${missing.join(", ")})`;
        return h("option", { value: f.name, disabled: true, text, dataset: { missingTools: missing.join(",") } });
      }
      return h("option", { value: f.name, text: f.type && f.type !== "workflow" ? `${f.name} (${f.type})` : f.name });
    }),
  );
  if (catalog.formulas.some((f) => f.name === current && !(f.missing_tools || []).length)) select.value = current;
  renderFormulaVars();
}

function varType(spec) {
  const type = String(spec.type || "").toLowerCase();
  if (type === "bool" || type === "boolean") return "bool";
  if (type === "int" || type === "integer") return "int";
  if (type === "float" || type === "number") return "float";
  if (!type && typeof spec.default === "boolean") return "bool";
  if (!type && typeof spec.default === "number") return Number.isInteger(spec.default) ? "int" : "float";
  return "string";
}

function renderFormulaVars() {
  const formula = catalog.formulas.find((f) => f.name === $("formula-name").value && !f.error);
  $("formula-description").textContent = formula ? formula.description || "" : "";
  const vars = formula && formula.vars ? Object.entries(formula.vars) : [];
  $("formula-vars").hidden = vars.length === 0;
  replace($("formula-var-fields"), vars.map(([name, spec]) => varField(name, spec || {})));
}

function varField(name, spec) {
  const id = uid(`var-${name}`);
  const hintId = spec.description ? `${id}-hint` : null;
  const errorId = `${id}-error`;
  const type = varType(spec);
  const describedBy = [hintId, errorId].filter(Boolean).join(" ");
  const common = { id, name, "aria-describedby": describedBy, required: Boolean(spec.required) && type !== "bool" };
  const hasDefault = spec.default !== undefined && spec.default !== null;
  let input;
  if (Array.isArray(spec.enum) && spec.enum.length) {
    input = h(
      "select",
      common,
      spec.required && !hasDefault ? h("option", { value: "", text: "Choose…" }) : null,
      !spec.required && !hasDefault ? h("option", { value: "", text: "(not set)" }) : null,
      spec.enum.map((value) => h("option", { value: String(value), text: String(value), selected: hasDefault && value === spec.default })),
    );
  } else if (type === "bool") {
    input = h("input", { ...common, type: "checkbox", checked: spec.default === true });
  } else if (type === "int" || type === "float") {
    input = h("input", { ...common, type: "number", step: type === "int" ? "1" : "any", value: hasDefault ? String(spec.default) : "" });
  } else {
    input = h("input", { ...common, type: "text", autocomplete: "off", value: hasDefault ? String(spec.default) : "" });
  }
  input.dataset.varType = type;
  return h(
    "div",
    { class: `field${type === "bool" ? " field-boolean" : ""}` },
    h("label", { for: id }, name, spec.required ? h("span", { class: "required", text: " *" }) : null),
    input,
    hintId ? h("small", { id: hintId, class: "hint", text: spec.description }) : null,
    h("small", { id: errorId, class: "field-error", "aria-live": "polite", dataset: { errorFor: name } }),
  );
}

// -- mistakes next to their fields --------------------------------------------------------------------------

/** Show `message` under `input` (its error element is named by its aria-describedby). */
function fieldError(input, message) {
  const errorId = (input.getAttribute("aria-describedby") || "").split(" ").find((id) => id.endsWith("-error"));
  const target = errorId ? document.getElementById(errorId) : null;
  if (target) target.textContent = message;
  input.setAttribute("aria-invalid", "true");
}

function clearFieldErrors(form) {
  for (const el of form.querySelectorAll(".field-error")) el.textContent = "";
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
}

function varInput(name) {
  return [...$("formula-var-fields").querySelectorAll("input, select")].find((input) => input.name === name) || null;
}

/**
 * Put each of a refused start's problems next to its field (a check issue at `vars.<name>`, a validation
 * error at body.vars.<name>); returns the problems that belong to no field.
 */
function placeProblems(error, fieldFor) {
  const problem = error && error.problem ? error.problem : {};
  const placed = [];
  const issues = Array.isArray(problem.issues) ? problem.issues.filter((i) => i.level === "error") : [];
  for (const issue of issues) {
    const input = fieldFor(String(issue.path || ""));
    if (input) {
      fieldError(input, issue.message);
      placed.push(issue);
    }
  }
  if (Array.isArray(problem.detail)) {
    for (const item of problem.detail) {
      const loc = (item.loc || []).filter((part) => part !== "body").join(".");
      const input = fieldFor(loc);
      if (input) {
        fieldError(input, item.msg || String(item));
        placed.push(item);
      }
    }
  }
  return { placed: placed.length, total: issues.length + (Array.isArray(problem.detail) ? problem.detail.length : 0) };
}

function formulaField(path) {
  const match = path.match(/^vars\.([^.[\]]+)/);
  return match ? varInput(match[1]) : null;
}

function agentField(path) {
  const name = path.split(".")[0];
  return { prompt: $("agent-prompt"), model: $("agent-model") }[name] || null;
}

function readVars() {
  const vars = {};
  const missing = [];
  for (const input of $("formula-var-fields").querySelectorAll("input, select")) {
    const type = input.dataset.varType;
    if (type === "bool") {
      vars[input.name] = input.checked;
      continue;
    }
    const text = input.value.trim();
    if (text === "") {
      if (input.required) missing.push(input);
      continue;
    }
    vars[input.name] = (type === "int" || type === "float") && input.type === "number" ? Number(text) : text;
  }
  return { vars, missing };
}

async function startFormula(event) {
  event.preventDefault();
  clearError();
  const form = $("formula-form");
  clearFieldErrors(form);
  const name = $("formula-name").value;
  if (!name) {
    fieldError($("formula-name"), "Choose a formula to run.");
    $("formula-name").focus();
    return;
  }
  const { vars, missing } = readVars();
  if (missing.length) {
    for (const input of missing) fieldError(input, `The var "${input.name}" is required.`);
    missing[0].focus();
    return;
  }
  await startRun({ kind: "formula", formula: name, vars }, event.submitter || event.target.querySelector("[type=submit]"), formulaField);
}

async function startAgent(event) {
  event.preventDefault();
  clearError();
  clearFieldErrors($("agent-form"));
  const prompt = $("agent-prompt").value.trim();
  if (!prompt) {
    fieldError($("agent-prompt"), "Write a prompt for the agent.");
    $("agent-prompt").focus();
    return;
  }
  const body = { kind: "agent", prompt };
  const model = $("agent-model").value.trim();
  if (model) body.model = model;
  if ($("agent-mode").value) body.mode = $("agent-mode").value;
  const tools = [...$("agent-tools").querySelectorAll("input:checked")].map((input) => input.value);
  if (tools.length) body.tools = tools;
  if ($("agent-always").checked) body.always_execute = true;
  if ($("agent-plan-consent").checked) body.plan_consent = true;
  await startRun(body, event.submitter || event.target.querySelector("[type=submit]"), agentField);
}

async function startRun(body, button, fieldFor) {
  if (button) button.disabled = true;
  try {
    const created = await api("POST", "/v1/runs", body);
    const run = created && created.run ? created.run : created;
    announce(`Started ${run.name || run.id}.`);
    runsChanged();
    location.hash = `#/runs/${encodeURIComponent(run.id)}`;
  } catch (error) {
    const { placed, total } = error.status === 422 ? placeProblems(error, fieldFor) : { placed: 0, total: 0 };
    // what belongs to a field is shown there; the banner says the rest (or that the form has mistakes)
    if (placed === 0 || placed < total) showError(error);
    else announce("The run was not started: see the marked fields.");
  } finally {
    if (button) button.disabled = false;
  }
}

export async function loadTools() {
  let tools;
  try {
    tools = itemsOf(await api("GET", "/v1/tools"));
  } catch (error) {
    showError(error);
    return;
  }
  catalog.tools = new Map(tools.map((t) => [t.name, t]));
  replace(
    $("agent-tools"),
    tools.map((tool) => {
      const id = uid(`tool-${tool.name}`);
      return h(
        "div",
        { class: "tool-choice" },
        h("input", { type: "checkbox", id, value: tool.name }),
        h("label", { for: id }, h("code", { text: tool.name }), tool.effect === "write" ? h("span", { class: "effect-write", text: " write" }) : null),
        tool.description ? h("small", { class: "hint", text: tool.description.split("\n")[0] }) : null,
      );
    }),
  );
}

/** Wire the tabs and the two forms. */
export function initStartForms() {
  $("tab-formula").addEventListener("click", () => selectTab("formula"));
  $("tab-agent").addEventListener("click", () => selectTab("agent"));
  for (const tab of document.querySelectorAll('[role="tab"]')) {
    tab.addEventListener("keydown", (event) => {
      if (event.key !== "ArrowLeft" && event.key !== "ArrowRight") return;
      const next = tab.id === "tab-formula" ? "agent" : "formula";
      selectTab(next);
      $(`tab-${next}`).focus();
    });
  }
  selectTab("formula");
  $("formula-name").addEventListener("change", renderFormulaVars);
  $("formula-form").addEventListener("submit", startFormula);
  $("agent-form").addEventListener("submit", startAgent);
}
