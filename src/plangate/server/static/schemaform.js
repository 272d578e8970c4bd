// A form generated from a tool's JSON schema, pre-filled with a call's arguments; used to edit a call
// before approving it. Scalar fields (string, number, integer, boolean, enum) get inputs; anything else
// (objects, arrays, unions) gets a JSON textarea; "Edit as JSON" switches the whole call to raw JSON.

import { h, uid } from "./dom.js";

/** The field kind for a property schema: enum | string | number | integer | boolean | json. */
export function fieldKind(schema) {
  const plain = unwrapNullable(schema || {});
  if (Array.isArray(plain.enum) && plain.enum.length) return "enum";
  if (plain.const !== undefined) return "enum";
  const type = plain.type;
  if (type === "string" || type === "number" || type === "integer" || type === "boolean") return type;
  return "json";
}

function unwrapNullable(schema) {
  if (Array.isArray(schema.type)) {
    const types = schema.type.filter((t) => t !== "null");
    if (types.length === 1) return { ...schema, type: types[0] };
  }
  for (const key of ["anyOf", "oneOf"]) {
    if (Array.isArray(schema[key])) {
      const options = schema[key].filter((option) => option && option.type !== "null");
      if (options.length === 1) return { ...schema, ...options[0], [key]: undefined };
    }
  }
  return schema;
}

/**
 * Build the form. Returns {element, read}: `read()` gives the edited arguments or throws an Error whose
 * message names the field and what is wrong.
 */
export function argumentsForm(parameters, values) {
  const schema = parameters && typeof parameters === "object" ? parameters : {};
  const properties = schema.properties && typeof schema.properties === "object" ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const original = values && typeof values === "object" ? values : {};
  const names = Object.keys(properties);

  const fields = names.map((name) => buildField(name, properties[name], required.has(name), original));
  const fieldBox = h("div", { class: "schema-fields" }, fields.map((f) => f.element));

  const rawId = uid("raw");
  const raw = h("textarea", { id: rawId, class: "raw-json", rows: 8, spellcheck: "false" });
  const rawBox = h("div", { class: "raw-box" }, h("label", { for: rawId, text: "Arguments (JSON)" }), raw);
  const toggleId = uid("asjson");
  const toggle = h("input", { type: "checkbox", id: toggleId });
  const onlyJson = names.length === 0;

  // keys the schema does not name ride along untouched (and follow the raw JSON when it is edited)
  let extras = Object.fromEntries(Object.entries(original).filter(([key]) => !(key in properties)));

  function readFields() {
    const result = { ...extras };
    for (const field of fields) field.read(result);
    return result;
  }

  function show(asJson) {
    fieldBox.hidden = asJson;
    rawBox.hidden = !asJson;
  }

  toggle.addEventListener("change", () => {
    if (toggle.checked) {
      try {
        raw.value = JSON.stringify(readFields(), null, 2);
      } catch {
        raw.value = JSON.stringify(original, null, 2);
      }
      show(true);
      return;
    }
    let parsed;
    try {
      parsed = parseObject(raw.value);
    } catch (error) {
      toggle.checked = true;
      raw.setCustomValidity(error.message);
      raw.reportValidity();
      return;
    }
    raw.setCustomValidity("");
    extras = Object.fromEntries(Object.entries(parsed).filter(([key]) => !(key in properties)));
    for (const field of fields) field.fill(parsed);
    show(false);
  });

  raw.value = JSON.stringify(original, null, 2);
  show(onlyJson);
  const element = h(
    "div",
    { class: "schema-form" },
    fieldBox,
    rawBox,
    onlyJson ? null : h("p", { class: "switch" }, toggle, h("label", { for: toggleId, text: " Edit as JSON" })),
  );

  return {
    element,
    read() {
      if (onlyJson || toggle.checked) return parseObject(raw.value);
      return readFields();
    },
  };
}

function parseObject(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`The arguments are not valid JSON: ${error.message}`);
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    throw new Error("The arguments must be a JSON object, like {\"name\": \"value\"}.");
  }
  return value;
}

function buildField(name, propertySchema, isRequired, original) {
  const schema = unwrapNullable(propertySchema || {});
  const kind = fieldKind(schema);
  const id = uid(`arg-${name}`);
  const hintId = schema.description ? `${id}-hint` : null;
  const present = Object.prototype.hasOwnProperty.call(original, name);
  const label = h("label", { for: id }, name, isRequired ? h("span", { class: "required", text: " *" }) : null);
  const hint = hintId ? h("small", { id: hintId, class: "hint", text: schema.description }) : null;
  const common = { id, name, "aria-describedby": hintId, required: isRequired && kind !== "boolean" };
  const placeholder =
    schema.default !== undefined && schema.default !== null && schema.default !== "" ? `default: ${schema.default}` : null;
  let input;
  let fill;
  let read;

  if (kind === "enum") {
    const options = Array.isArray(schema.enum) ? schema.enum : [schema.const];
    input = h(
      "select",
      common,
      isRequired ? null : h("option", { value: "", text: "(not set)" }),
      options.map((option, i) => h("option", { value: String(i), text: String(option) })),
    );
    fill = (values) => {
      const index = options.findIndex((o) => JSON.stringify(o) === JSON.stringify(values[name]));
      input.value = index >= 0 ? String(index) : isRequired ? "0" : "";
    };
    read = (result) => {
      if (input.value !== "") result[name] = options[Number(input.value)];
    };
  } else if (kind === "boolean") {
    input = h("input", { ...common, type: "checkbox" });
    const fallback = schema.default === true;
    fill = (values) => {
      input.checked = name in values ? values[name] === true : fallback;
    };
    read = (result) => {
      if (present || isRequired || input.checked !== fallback) result[name] = input.checked;
    };
  } else if (kind === "number" || kind === "integer") {
    input = h("input", { ...common, type: "number", step: kind === "integer" ? "1" : "any", placeholder });
    fill = (values) => {
      input.value = typeof values[name] === "number" ? String(values[name]) : "";
    };
    read = (result) => {
      const text = input.value.trim();
      if (text === "") {
        if (isRequired) throw new Error(`${name}: a ${kind === "integer" ? "whole number" : "number"} is required.`);
        return;
      }
      const number = Number(text);
      if (!Number.isFinite(number) || (kind === "integer" && !Number.isInteger(number))) {
        throw new Error(`${name}: expected ${kind === "integer" ? "a whole number" : "a number"}, got ${text}.`);
      }
      result[name] = number;
    };
  } else if (kind === "string") {
    input = h("input", { ...common, type: "text", autocomplete: "off", placeholder });
    fill = (values) => {
      input.value = values[name] === undefined || values[name] === null ? "" : String(values[name]);
    };
    read = (result) => {
      if (input.value !== "" || present || isRequired) result[name] = input.value;
    };
  } else {
    input = h("textarea", { ...common, rows: 3, spellcheck: "false", class: "json-field" });
    fill = (values) => {
      input.value = name in values ? JSON.stringify(values[name], null, 2) : "";
    };
    read = (result) => {
      const text = input.value.trim();
      if (text === "") {
        if (isRequired) throw new Error(`${name}: a value is required (JSON).`);
        return;
      }
      try {
        result[name] = JSON.parse(text);
      } catch (error) {
        throw new Error(`${name}: not valid JSON (${error.message}).`);
      }
    };
  }
  fill(original);
  const element = h("div", { class: `field field-${kind}`, dataset: { field: name } }, label, input, hint);
  return { element, fill, read };
}
