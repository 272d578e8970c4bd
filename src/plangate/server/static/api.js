// The console's HTTP client: bearer token, JSON calls, problem documents as errors, and the event stream.
//
// The event stream is read with fetch() rather than EventSource so that it can carry the Authorization header
// like every other call (an access token in a URL ends up in logs and history).

const TOKEN_KEY = "plangate.token";

/** An error the API answered with: a problem document ({type, title, detail, status}). */
export class ProblemError extends Error {
  constructor(status, problem) {
    super(describe(status, problem));
    this.status = status;
    this.problem = problem || {};
  }
}

function describe(status, problem) {
  if (!problem || typeof problem !== "object") return `The server answered ${status}.`;
  const title = problem.title || `The server answered ${status}`;
  let detail = problem.detail;
  if (Array.isArray(detail)) {
    // validation errors: [{loc, msg}, ...]
    detail = detail.map((item) => `${(item.loc || []).join(".")}: ${item.msg || pretty(item)}`).join("; ");
  } else if (detail && typeof detail === "object") {
    detail = JSON.stringify(detail);
  }
  if (!detail || detail === title) return title;
  return `${title}: ${detail}`;
}

function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The stored token, or "" when none was given. */
export function getToken() {
  try {
    return localStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

export function setToken(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

let askToken = async () => false;

/**
 * Register how to ask the person for a token; called with the reason, it resolves true when a new token was
 * saved (the failed call is then retried once).
 */
export function onTokenNeeded(handler) {
  askToken = handler;
}

function headers(extra = {}) {
  const result = { Accept: "application/json", ...extra };
  const token = getToken();
  if (token) result.Authorization = `Bearer ${token}`;
  return result;
}

async function readProblem(response) {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    return { title: `The server answered ${response.status} ${response.statusText}`.trim(), detail: text };
  }
}

/** Call the API; resolves to the parsed JSON body (null when empty), rejects with ProblemError. */
export async function api(method, path, body, { retried = false } = {}) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ProblemError(0, { title: "Cannot reach the server", detail: String(error.message || error) });
  }
  if (response.status === 401 && !retried) {
    const problem = await readProblem(response);
    if (await askToken(describe(401, problem))) return api(method, path, body, { retried: true });
    throw new ProblemError(401, problem);
  }
  if (!response.ok) throw new ProblemError(response.status, await readProblem(response));
  if (response.status === 204) return null;
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

/**
 * Follow a run's events from `after` (a seq). Calls `onEvent(type, data, seq)` for each event, including the
 * final `end`. Reconnects from the last seq when the connection drops, until `end` arrives or `signal` aborts.
 * `onState("live" | "reconnecting" | "ended")` reports the connection.
 */
export async function followEvents(runId, { after = 0, signal, onEvent, onState = () => {} }) {
  let last = after;
  let delay = 500;
  let retriedAuth = false;
  while (!signal.aborted) {
    try {
      const url = `/v1/runs/${encodeURIComponent(runId)}/events?after=${last}`;
      const response = await fetch(url, { headers: headers({ Accept: "text/event-stream" }), signal });
      if (response.status === 401 && !retriedAuth) {
        retriedAuth = true;
        if (await askToken(describe(401, await readProblem(response)))) continue;
      }
      if (!response.ok) throw new ProblemError(response.status, await readProblem(response));
      onState("live");
      delay = 500;
      let ended = false;
      for await (const message of sseMessages(response.body, signal)) {
        const seq = Number.parseInt(message.id, 10);
        if (Number.isFinite(seq) && seq > last) last = seq;
        let data = null;
        try {
          data = message.data ? JSON.parse(message.data) : null;
        } catch {
          data = { text: message.data };
        }
        onEvent(message.event || "message", data, seq);
        if (message.event === "end") {
          ended = true;
          break;
        }
      }
      if (ended) {
        onState("ended");
        return;
      }
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ProblemError && error.status >= 400 && error.status < 500) throw error;
    }
    onState("reconnecting");
    await sleep(delay, signal);
    delay = Math.min(delay * 2, 5000);
  }
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Parse a text/event-stream body into {id, event, data} messages. */
async function* sseMessages(body, signal) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  const stop = () => reader.cancel().catch(() => {});
  signal.addEventListener("abort", stop);
  let buffer = "";
  let message = { id: "", event: "", data: [] };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let newline;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // a "\r" that ends the chunk may be the first half of "\r\n": wait for the next chunk
        if (buffer[newline] === "\r" && newline === buffer.length - 1) break;
        const line = buffer.slice(0, newline);
        const width = buffer.startsWith("\r\n", newline) ? 2 : 1;
        buffer = buffer.slice(newline + width);
        if (line === "") {
          if (message.data.length || message.event) {
            yield { id: message.id, event: message.event, data: message.data.join("\n") };
          }
          message = { id: "", event: "", data: [] };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") message.data.push(value);
        else if (field === "event") message.event = value;
        else if (field === "id") message.id = value;
      }
    }
  } finally {
    signal.removeEventListener("abort", stop);
  }
}
