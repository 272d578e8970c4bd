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
