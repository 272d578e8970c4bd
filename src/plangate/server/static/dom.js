// Small DOM helpers for the console: build elements from data without ever parsing data as HTML.

/**
 * Build an element. `attrs` keys: `class`, `text`, `on<event>` handlers, `dataset`, boolean and string
 * attributes; children are nodes, strings (as text) or falsy values (skipped).
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = String(value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "value" || key === "checked" || key === "selected") el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Seconds since the epoch (the API's timestamps) → a short local time. */
export function clock(seconds) {
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds <= 0) return "";
  const date = new Date(seconds * 1000);
  const today = new Date();
  const sameDay = date.toDateString() === today.toDateString();
  return sameDay ? date.toLocaleTimeString() : date.toLocaleString();
}

/** JSON for people: compact when short, indented when long. */
export function pretty(value) {
  if (value === undefined) return "";
  const flat = JSON.stringify(value);
  if (flat === undefined) return String(value);
  return flat.length <= 80 ? flat : JSON.stringify(value, null, 2);
}

let counter = 0;
/** A page-unique id for label/field pairs. */
export function uid(prefix = "f") {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** The status badge shared by the runs list, the run header and the DAG. */
export function badge(status) {
  const text = status || "unknown";
  return h("span", { class: `badge status-${text}`, text, dataset: { status: text } });
}

/** A run's or a turn's usage in one line: tokens in (cached) and out, the model (each one's tokens when it
 *  called several), and the cost when the server has prices for its models. */
export function usageText(usage) {
  const count = (value) => (typeof value === "number" ? value.toLocaleString("en-US") : "?");
  let text = `${count(usage.input_tokens)} tokens in`;
  if (usage.cached_input_tokens) text += ` (${count(usage.cached_input_tokens)} cached)`;
  text += `, ${count(usage.output_tokens)} out in ${count(usage.calls)} model calls`;
  const models = Object.entries(usage.models || {});
  if (models.length === 1) text += ` (${models[0][0]})`;
  else if (models.length) {
    text += ` (${models.map(([name, tally]) => `${name}: ${count(tally.input_tokens)} in, ${count(tally.output_tokens)} out`).join("; ")})`;
  }
  if (typeof usage.cost === "number") text += ` · cost ${usage.cost.toFixed(6)}`;
  return text;
}
