// The HTTP API client: JSON requests with the API key (when one is set),
// problem+json errors as ApiError, and the key prompt on 401.

const KEY = "convlog.apiKey";

// ApiError is a failed request: the RFC 9457 problem the API answered (or
// one made up for a network failure).
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || "HTTP " + status);
    this.status = status;
    this.problem = problem;
  }
  // describe is a one-line human message: title, detail and the fields the
  // problem names (field, thread, seq).
  describe() {
    const p = this.problem;
    const bits = [];
    if (p.title && p.title !== p.detail) bits.push(p.title + ":");
    if (p.detail) bits.push(p.detail);
    const where = [];
    if (p.field) where.push("field " + p.field);
    if (p.seq) where.push("seq " + p.seq);
    if (where.length) bits.push("(" + where.join(", ") + ")");
    return bits.join(" ") || "HTTP " + this.status;
  }
}

export function apiKey() {
  try { return sessionStorage.getItem(KEY) || ""; } catch { return ""; }
}

export function setAPIKey(k) {
  try {
    if (k) sessionStorage.setItem(KEY, k);
    else sessionStorage.removeItem(KEY);
  } catch { /* storage disabled: the key lives until reload */ }
  keyListeners.forEach((f) => f(k));
}

const keyListeners = [];
export function onKeyChange(f) { keyListeners.push(f); }

// authHeaders returns the Authorization header for the current key.
export function authHeaders() {
  const k = apiKey();
  return k ? { Authorization: "Bearer " + k } : {};
}

// askForKey opens the key dialog; it resolves true when a key was entered.
// Concurrent 401s share one prompt.
let asking = null;
export function askForKey(reason) {
  if (asking) return asking;
  const dlg = document.getElementById("key-dialog");
  const input = document.getElementById("key-input");
  document.getElementById("key-dialog-reason").textContent = reason ||
    "This server asks for an API key (401 Unauthorized).";
  input.value = "";
  asking = new Promise((resolve) => {
    dlg.addEventListener("close", () => {
      asking = null;
      if (dlg.returnValue === "save" && input.value.trim()) {
        setAPIKey(input.value.trim());
        resolve(true);
      } else {
        if (dlg.returnValue === "forget") setAPIKey("");
        resolve(false);
      }
    }, { once: true });
    dlg.returnValue = "";
    dlg.showModal();
    input.focus();
  });
  return asking;
}

// problemOf reads a failed response's problem (or makes one up).
export async function problemOf(res) {
  const ct = res.headers.get("Content-Type") || "";
  if (ct.includes("json")) {
    try { return await res.json(); } catch { /* fall through */ }
  }
  let text = "";
  try { text = (await res.text()).slice(0, 300); } catch { /* ignore */ }
  return { title: res.statusText || "HTTP " + res.status, status: res.status, detail: text };
}

// fetchAuthed is fetch with the API key; on 401 it asks for a key and
// retries once per key entered. It returns the Response.
export async function fetchAuthed(path, init = {}) {
  for (;;) {
    const headers = { ...(init.headers || {}), ...authHeaders() };
    let res;
    try {
      res = await fetch(path, { ...init, headers, cache: "no-store" });
    } catch (e) {
      if (e.name === "AbortError") throw e;
      throw new ApiError(0, { title: "Network error", detail: "cannot reach the server: " + e.message });
    }
    if (res.status !== 401) return res;
    const p = await problemOf(res);
    const reason = apiKey() ? "The API key was refused: " + (p.detail || p.title) : "This server needs an API key: " + (p.detail || p.title);
    if (!(await askForKey(reason))) throw new ApiError(401, p);
  }
}

// request sends a JSON request and returns the decoded body (null for an
// empty one). opts: {method, body (an object, sent as JSON), headers, signal}.
export async function request(path, opts = {}) {
  const init = { method: opts.method || "GET", headers: { Accept: "application/json", ...(opts.headers || {}) }, signal: opts.signal };
  if (opts.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(opts.body);
  }
  const res = await fetchAuthed(path, init);
  if (!res.ok) throw new ApiError(res.status, await problemOf(res));
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

// download fetches path with the key and saves the body as filename
// (links cannot carry an Authorization header).
export async function download(path, filename) {
  const res = await fetchAuthed(path);
  if (!res.ok) throw new ApiError(res.status, await problemOf(res));
  const blob = await res.blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

export const enc = encodeURIComponent;
