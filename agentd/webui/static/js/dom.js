// DOM helpers. Every piece of text from the API goes through textContent
// (h's string children): the page never parses HTML it did not write.

// h builds an element: h("button", {type: "button", onclick: f}, "Send").
// Attributes starting with "on" are listeners; "class", "dataset" and
// boolean attributes are handled; null/undefined/false values are skipped.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "dataset") {
      Object.assign(el.dataset, v);
    } else if (k === "class") {
      el.className = Array.isArray(v) ? v.filter(Boolean).join(" ") : v;
    } else if (v === true) {
      el.setAttribute(k, "");
    } else {
      el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// fill replaces el's children (null, undefined and false are skipped).
export function fill(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

// clear removes every child of el.
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// timeEl renders an RFC 3339 time as <time>, short text, full in the title.
export function timeEl(iso, style) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const d = new Date(iso);
  if (isNaN(d)) return h("span", {}, iso);
  let text;
  if (style === "clock") {
    text = d.toLocaleTimeString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
  } else {
    text = relative(d);
  }
  return h("time", { datetime: iso, title: d.toISOString() }, text);
}

// relative says how long ago d was ("12 s ago", "3 min ago", or a date).
export function relative(d) {
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  if (s < 5) return "just now";
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  if (s < 86400) return Math.floor(s / 3600) + " h ago";
  return d.toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" });
}

// contentText returns the text of message content: null, a string, or a
// list of parts (text parts joined; other parts named in brackets).
export function contentText(c) {
  if (c === null || c === undefined) return "";
  if (typeof c === "string") return c;
  if (Array.isArray(c)) {
    return c.map((p) => {
      if (p.type === "text") return p.text || "";
      if (p.type === "image") return "[image" + (p.url && !p.url.startsWith("data:") ? ": " + p.url : "") + "]";
      if (p.type === "file") return "[file" + (p.filename ? ": " + p.filename : p.file_id ? ": " + p.file_id : "") + "]";
      return "[" + (p.type || "part") + "]";
    }).join("\n");
  }
  return JSON.stringify(c);
}

// prettyJSON formats a JSON text for display, or returns it as is.
export function prettyJSON(text) {
  if (text === undefined || text === null) return "";
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

// shortID shortens long ids for tight spaces (the full id goes in a title).
export function shortID(id) {
  if (!id) return "";
  return id.length > 14 ? id.slice(0, 8) + "…" + id.slice(-4) : id;
}

// idEl shows an id shortened (see shortID), the full id in its title.
export function idEl(id, attrs = {}) {
  return h("code", { ...attrs, title: id }, shortID(id));
}

// firstLine returns the first non-empty line of text, cut to max
// characters with an ellipsis.
export function firstLine(text, max = 80) {
  const line = (text || "").split("\n").map((l) => l.trim()).find(Boolean) || "";
  return line.length > max ? line.slice(0, max - 1).trimEnd() + "…" : line;
}

// sourceTitle names an imported thread by its source: the metadata's
// source_id (e.g. "tooltalk/Email-Messages-Reminder-SendMessage-2"), else
// its source; "" for a thread with neither.
export function sourceTitle(metadata) {
  const m = metadata || {};
  return m.source_id || m.source || "";
}

// announce writes a polite status message (for screen readers and eyes).
export function announce(el, text) {
  el.textContent = "";
  // A fresh text node makes screen readers repeat identical messages.
  requestAnimationFrame(() => { el.textContent = text; });
}

// uuid returns a random UUID (Idempotency-Key of a send).
export function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, "0")).join("");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
