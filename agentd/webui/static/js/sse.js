// Server-sent events over fetch(): a parser for the text/event-stream
// format and a reconnecting stream that resumes with Last-Event-ID.
//
// EventSource is not used because it cannot send an Authorization header;
// with fetch() one code path serves auth on and off.

import { askForKey, authHeaders, problemOf } from "./api.js";

// SSEParser turns text/event-stream text, fed in arbitrary chunks, into
// events, following the HTML standard's parsing rules: lines end with
// CRLF, LF or CR (also split across chunks); lines starting with ":" are
// comments; "data" lines accumulate (joined with LF); "id" sets the last
// event id (kept across events, ignored if it holds NUL); "retry" sets the
// reconnection time; an empty line dispatches; an event without data is
// not dispatched; a frame cut off by the end of the stream is never
// dispatched (call reset before reading a new connection).
export class SSEParser {
  // onEvent({type, data, lastEventId, hasId}) is called per event;
  // onRetry(ms) when the stream sets the reconnection time.
  constructor(onEvent, onRetry) {
    this.onEvent = onEvent;
    this.onRetry = onRetry || (() => {});
    this.lastEventId = "";
    this.reset();
  }

  // reset drops a partial line or frame (a new connection starts clean)
  // and keeps the last event id.
  reset() {
    this.buf = "";
    this.data = [];
    this.event = "";
    this.hasId = false;
    this.skipLF = false;
    this.start = true;
  }

  feed(chunk) {
    if (!chunk) return;
    if (this.start) {
      this.start = false;
      if (chunk.charCodeAt(0) === 0xfeff) chunk = chunk.slice(1);
    }
    if (this.skipLF) {
      this.skipLF = false;
      if (chunk[0] === "\n") chunk = chunk.slice(1);
    }
    const s = this.buf + chunk;
    let from = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      this.line(s.slice(from, i));
      if (c === 13) {
        if (i + 1 < s.length) {
          if (s.charCodeAt(i + 1) === 10) i++;
        } else {
          this.skipLF = true; // the LF of a CRLF may come with the next chunk
        }
      }
      from = i + 1;
    }
    this.buf = s.slice(from);
  }

  line(l) {
    if (l === "") {
      this.dispatch();
      return;
    }
    if (l[0] === ":") return;
    const i = l.indexOf(":");
    const field = i < 0 ? l : l.slice(0, i);
    let value = i < 0 ? "" : l.slice(i + 1);
    if (value[0] === " ") value = value.slice(1);
    switch (field) {
      case "event": this.event = value; break;
      case "data": this.data.push(value); break;
      case "id":
        if (!value.includes("\0")) {
          this.lastEventId = value;
          this.hasId = true;
        }
        break;
      case "retry":
        if (/^\d+$/.test(value)) this.onRetry(parseInt(value, 10));
        break;
      default: // unknown fields are ignored
    }
  }

  dispatch() {
    const data = this.data, type = this.event || "message", hasId = this.hasId;
    this.data = [];
    this.event = "";
    this.hasId = false;
    if (data.length === 0) return;
    this.onEvent({ type, data: data.join("\n"), lastEventId: this.lastEventId, hasId });
  }
}

// Stream states reported to onStatus.
export const CONNECTING = "connecting", OPEN = "open", RECONNECTING = "reconnecting", FAILED = "failed", CLOSED = "closed";

// EventStream reads an SSE URL with fetch() and reconnects when the
// connection drops, sending the id of the last event it received as
// Last-Event-ID, so the server resumes right after it (no gap, no
// duplicate). Reconnects back off from the server's retry hint up to 10 s.
// A connection silent for longer than stallMs (the server sends a
// heartbeat every 15 s) counts as dropped. A 401 asks for an API key; other
// 4xx answers end the stream (FAILED).
//
// opts: {lastEventId, onEvent(ev), onStatus({state, resumedFrom, delay,
// attempt, problem, error}), stallMs}.
export class EventStream {
  constructor(url, opts) {
    this.url = url;
    this.onEvent = opts.onEvent;
    this.onStatus = opts.onStatus || (() => {});
    this.stallMs = opts.stallMs || 45000;
    this.retry = 1000;
    this.stopped = false;
    this.parser = new SSEParser((ev) => this.onEvent(ev), (ms) => { this.retry = Math.max(100, ms); });
    this.parser.lastEventId = opts.lastEventId === undefined || opts.lastEventId === null ? "" : String(opts.lastEventId);
  }

  get lastEventId() { return this.parser.lastEventId; }

  start() {
    this.run();
    return this;
  }

  // stop ends the stream for good (CLOSED).
  stop() {
    if (this.stopped) return;
    this.stopped = true;
    if (this.ctrl) this.ctrl.abort();
    if (this.wake) this.wake();
    this.onStatus({ state: CLOSED });
  }

  // drop closes the current connection as if the network had dropped it;
  // the stream reconnects (and resumes) on its own.
  drop() {
    if (this.ctrl) this.ctrl.abort();
  }

  async run() {
    let failures = 0, opened = false;
    this.onStatus({ state: CONNECTING });
    while (!this.stopped) {
      const headers = { Accept: "text/event-stream", ...authHeaders() };
      const resumeFrom = this.parser.lastEventId;
      if (resumeFrom !== "") headers["Last-Event-ID"] = resumeFrom;
      this.ctrl = new AbortController();
      let res = null, error = null;
      try {
        res = await fetch(this.url, { headers, signal: this.ctrl.signal, cache: "no-store" });
      } catch (e) {
        error = e;
      }
      if (this.stopped) return;
      if (res && res.status === 401) {
        const p = await problemOf(res);
        if (await askForKey("The live stream needs an API key: " + (p.detail || p.title))) continue;
        this.stopped = true;
        this.onStatus({ state: FAILED, problem: p });
        return;
      }
      if (res && !res.ok) {
        const p = await problemOf(res);
        if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
          this.stopped = true;
          this.onStatus({ state: FAILED, problem: p });
          return;
        }
        error = new Error(p.detail || p.title || "HTTP " + res.status);
      } else if (res) {
        this.parser.reset();
        this.onStatus({ state: OPEN, resumedFrom: opened ? resumeFrom : null });
        opened = true;
        failures = 0;
        try {
          await this.read(res.body);
        } catch (e) {
          error = e;
        }
      }
      if (this.stopped) return;
      failures++;
      const base = Math.min(this.retry * 2 ** Math.min(failures - 1, 4), 10000);
      const delay = Math.round(base * (0.8 + Math.random() * 0.4));
      this.onStatus({ state: RECONNECTING, lastEventId: this.parser.lastEventId, delay, attempt: failures, error: error ? String(error.message || error) : "the server ended the stream" });
      await new Promise((resolve) => {
        const t = setTimeout(resolve, delay);
        this.wake = () => { clearTimeout(t); resolve(); };
      });
      this.wake = null;
    }
  }

  // read feeds the body to the parser until it ends; it throws when the
  // connection fails or stalls.
  async read(body) {
    const reader = body.getReader();
    const dec = new TextDecoder();
    let timer = null;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => { this.stalled = true; this.ctrl.abort(); }, this.stallMs);
    };
    arm();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        this.parser.feed(dec.decode(value, { stream: true }));
      }
    } catch (e) {
      if (this.stalled) {
        this.stalled = false;
        throw new Error("no data for " + Math.round(this.stallMs / 1000) + " s");
      }
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }
}
