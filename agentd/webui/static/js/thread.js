// The thread view: the transcript with live updates, the composer, and
// audit mode (event log, time travel, fork, export).

import { ApiError, request, download, enc } from "./api.js";
import { EventStream, OPEN, RECONNECTING, FAILED, CONNECTING } from "./sse.js";
import { Transcript } from "./transcript.js";
import { EventLog } from "./auditlog.js";
import { h, clear, fill, timeEl, uuid, announce, contentText, firstLine, idEl, shortID, sourceTitle } from "./dom.js";

function scrollToEnd() {
  window.scrollTo(0, document.documentElement.scrollHeight);
}

// threadTitle names a thread: its title, else (an imported thread has
// none) the first line of its first user message, else its source; "" if
// none of them is known.
export function threadTitle(s) {
  if (s.title) return s.title;
  const first = (s.messages || []).find((m) => m.role === "user" && contentText(m.content).trim());
  return (first && firstLine(contentText(first.content))) || sourceTitle(s.metadata);
}

// threadView renders thread id into main. params: URLSearchParams of the
// fragment (audit=1, at=N). ctx: {notify(text, kind), go(hash)}. It returns
// {destroy()}, called when the reader navigates away.
export function threadView(main, id, params, ctx) {
  const v = new ThreadView(main, id, params, ctx);
  v.start();
  return v;
}

class ThreadView {
  constructor(main, id, params, ctx) {
    this.main = main;
    this.id = id;
    this.ctx = ctx;
    this.audit = params.get("audit") === "1";
    this.wantAt = Number(params.get("at")) || 0;
    this.head = null; // the latest state (consistent read)
    this.viewSeq = 0; // 0 = live, else the sequence shown
    this.refreshing = null;
    this.refreshAgain = false;
    this.logLoaded = false;
    this.destroyed = false;
    this.build();
  }

  build() {
    const id = this.id;
    this.title = h("h1", { tabindex: "-1", class: "thread-title" }, "Thread");
    this.meta = h("p", { class: "meta muted" });
    // The fork lineage: the chain of sources up to the root (loadLineage).
    this.lineage = h("p", { class: "lineage muted", id: "lineage", hidden: true });
    this.conn = h("span", { class: "conn connecting", role: "status", id: "conn-status" }, "connecting…");
    this.sr = h("p", { class: "visually-hidden", role: "status" });
    this.resumeNote = h("p", { class: "resume-note", role: "status", id: "resume-note", hidden: true });
    this.auditBtn = h("button", { type: "button", class: "secondary", id: "audit-toggle", "aria-pressed": String(this.audit),
      "aria-controls": "audit-pane", onclick: () => this.setAudit(!this.audit) }, "Audit mode");
    this.forkBtn = h("button", { type: "button", class: "secondary", id: "fork-button", onclick: () => this.fork() }, "Fork");
    const exportLink = (format, label) => h("a", { class: "button secondary", href: `/v1/threads/${enc(id)}/export?format=${format}`,
      download: `${id}.${format}.jsonl`, onclick: (e) => this.exportClick(e, format) }, label);
    this.rejectNote = h("p", { class: "reject-note", hidden: true });

    this.transcriptList = h("ol", { class: "transcript", id: "transcript", role: "log", "aria-live": "polite",
      "aria-relevant": "additions text", "aria-label": "Messages" });
    this.transcript = new Transcript(this.transcriptList);
    this.asOf = h("div", { class: "asof-banner", id: "asof-banner", role: "status", hidden: true });

    this.text = h("textarea", { id: "composer-text", name: "text", rows: "2", required: true,
      "aria-describedby": "composer-hint", onkeydown: (e) => this.composerKey(e) });
    this.sendBtn = h("button", { type: "submit", id: "send-button" }, "Send");
    this.composerLabel = h("label", { for: "composer-text" }, "Message");
    this.composerHint = h("p", { class: "hint muted", id: "composer-hint" }, "Enter sends; Shift+Enter starts a new line.");
    this.composer = h("form", { class: "composer", id: "composer", onsubmit: (e) => this.send(e) },
      this.composerLabel, h("div", { class: "row" }, this.text, this.sendBtn), this.composerHint);

    // Audit pane.
    this.range = h("input", { type: "range", id: "tt-range", min: "0", max: "0", step: "1", value: "0",
      "aria-describedby": "tt-out", oninput: () => this.rangeMoved() });
    this.rangeOut = h("output", { id: "tt-out", for: "tt-range" }, "");
    this.seqInput = h("input", { type: "number", id: "tt-seq", min: "1", inputmode: "numeric", class: "seq-input" });
    this.latestBtn = h("button", { type: "button", class: "secondary", id: "tt-latest", onclick: () => this.showAt(0) }, "Latest");
    this.forkHereBtn = h("button", { type: "button", id: "fork-here", onclick: () => this.fork() }, "Fork from here");
    this.logBody = h("tbody");
    this.logCaption = h("caption", {}, "Event log");
    this.log = new EventLog(this.logBody, (seq) => this.showAt(seq));
    // Integrity: the thread checked against the signed checkpoints
    // (GET /v1/threads/{id}/audit; docs/audit.md).
    this.integrity = h("span", { class: "badge muted", id: "integrity", role: "status" }, "Integrity: not checked");
    this.integrityDetail = h("span", { class: "muted small", id: "integrity-detail" }, "");
    this.verifyBtn = h("button", { type: "button", class: "secondary", id: "verify-integrity", onclick: () => this.verifyIntegrity() }, "Verify");
    this.auditPane = h("section", { class: "audit-pane", id: "audit-pane", "aria-label": "Audit", hidden: !this.audit },
      h("h2", {}, "Audit"),
      h("div", { class: "row integrity" }, this.integrity, this.verifyBtn, this.integrityDetail),
      h("div", { class: "timetravel" },
        h("label", { for: "tt-range" }, "Time travel"),
        this.range, this.rangeOut),
      h("form", { class: "row seq-form", onsubmit: (e) => { e.preventDefault(); this.showAt(Number(this.seqInput.value) || 0); } },
        h("label", { for: "tt-seq" }, "Sequence"), this.seqInput,
        h("button", { type: "submit", class: "secondary" }, "Show"), this.latestBtn, this.forkHereBtn),
      // Sequences are stream positions, not a per-thread count: say why
      // they skip.
      h("p", { class: "seq-note muted small", id: "seq-note" },
        "Seq is the event's position in the server's stream, which holds every thread's events: " +
        "the numbers skip where other threads' events are. Versions count this thread's events only."),
      h("div", { class: "table-wrap" },
        h("table", { class: "events", id: "event-log", "aria-describedby": "seq-note" }, this.logCaption,
          h("thead", {}, h("tr", {},
            h("th", { scope: "col" }, "Seq"), h("th", { scope: "col" }, "Time"), h("th", { scope: "col" }, "Type"),
            h("th", { scope: "col" }, "Producer"), h("th", { scope: "col" }, "Event id"))),
          this.logBody)));

    this.transcriptPane = h("section", { class: "transcript-pane", "aria-label": "Transcript" },
      this.asOf, this.rejectNote, this.transcriptList, this.composer);
    this.body = h("div", { class: ["thread-body", this.audit && "with-audit"] }, this.transcriptPane, this.auditPane);
    // On narrow screens the composer is fixed to the bottom of the window
    // (app.css); the pane's padding-bottom, --composer-h, is its height so
    // that it never covers the end of the transcript.
    this.composerSize = new ResizeObserver(() => {
      this.transcriptPane.style.setProperty("--composer-h", Math.ceil(this.composer.getBoundingClientRect().height) + "px");
    });
    this.composerSize.observe(this.composer);

    clear(this.main).appendChild(h("section", { class: "thread", dataset: { thread: id } },
      h("div", { class: "thread-head" },
        h("div", {}, h("p", { class: "crumbs" }, h("a", { href: "#/" }, "← Threads")), this.title, this.meta, this.lineage),
        h("div", { class: "toolbar", role: "group", "aria-label": "Thread actions" },
          this.conn, this.auditBtn, this.forkBtn,
          exportLink("openai", "Export (OpenAI)"), exportLink("events", "Export (events)"))),
      this.resumeNote, this.sr,
      this.body));
  }

  async start() {
    try {
      this.head = await request(`/v1/threads/${enc(this.id)}?consistent=true`);
    } catch (e) {
      this.fail(e);
      return;
    }
    if (this.destroyed) return;
    this.renderHead();
    if (this.wantAt && this.wantAt < this.head.version) {
      await this.showAt(this.wantAt, true);
    } else {
      this.transcript.render(this.head, true);
      if (!this.audit) scrollToEnd();
    }
    // A new, empty thread: the reader came to write.
    if (!(this.head.messages || []).length && !this.viewSeq) this.text.focus({ preventScroll: true });
    else this.title.focus({ preventScroll: true });
    this.stream = new EventStream(`/v1/threads/${enc(this.id)}/events?deltas=true`, {
      lastEventId: this.head.version,
      onEvent: (ev) => this.onEvent(ev),
      onStatus: (s) => this.onStatus(s),
    }).start();
    if (this.audit) {
      this.loadLog();
      this.verifyIntegrity();
    }
  }

  destroy() {
    this.destroyed = true;
    this.composerSize.disconnect();
    if (this.stream) this.stream.stop();
    clearTimeout(this.rangeTimer);
  }

  fail(e) {
    const msg = e instanceof ApiError ? e.describe() : String(e);
    clear(this.main).appendChild(h("section", { class: "thread" },
      h("p", { class: "crumbs" }, h("a", { href: "#/" }, "← Threads")),
      h("h1", { tabindex: "-1" }, e.status === 404 ? "Thread not found" : "Cannot open the thread"),
      h("p", { class: "error-text" }, msg)));
    this.main.querySelector("h1").focus();
  }

  // renderHead shows the header and notes of the latest state.
  renderHead() {
    const s = this.head;
    const title = threadTitle(s);
    this.title.textContent = title || "Thread " + shortID(this.id);
    this.title.title = title ? "" : this.id;
    document.title = (title || shortID(this.id)) + " · convlog";
    const source = s.title ? "" : sourceTitle(s.metadata);
    fill(this.meta,
      idEl(this.id, { class: "thread-id" }),
      source ? h("span", { class: "source" }, " · source ", h("span", { title: (s.metadata && s.metadata.source) || "" }, source)) : null,
      s.agent ? h("span", {}, " · agent ", h("strong", {}, s.agent)) : " · no agent",
      s.owner ? h("span", {}, " · owner ", s.owner) : null,
      h("span", {}, " · ", h("span", { id: "msg-count" }, String(s.message_count ?? (s.messages || []).length)), " messages"),
      h("span", {}, " · version ", h("span", { id: "version" }, String(s.version))),
      s.forked_from ? h("span", {}, " · forked from ",
        h("a", { href: `#/t/${enc(s.forked_from.thread)}?audit=1&at=${s.forked_from.seq}` }, s.forked_from.thread),
        " at seq " + s.forked_from.seq) : null,
      s.redactions && s.redactions.length ? h("span", { class: "badge", id: "redactions",
        title: s.redactions.map((r) => r.up_to_seq ? `everything up to seq ${r.up_to_seq}: ${r.reason || ""}` : `seq ${r.seq}: ${r.reason || ""}`).join("\n") },
        `${s.redactions.length} redaction${s.redactions.length > 1 ? "s" : ""}`) : null,
      s.deleted ? h("span", { class: "badge error" }, "deleted") : null);
    this.loadLineage(s);
    const rej = s.rejected_count || 0;
    this.rejectNote.hidden = rej === 0;
    if (rej) {
      fill(this.rejectNote, `${rej} event${rej > 1 ? "s were" : " was"} rejected by the fold. `,
        this.audit ? (rej > 1 ? "They are" : "It is") + " highlighted in the event log, with the reason." :
          h("button", { type: "button", class: "linkish", onclick: () => this.setAudit(true) }, rej > 1 ? "Show them in audit mode" : "Show it in audit mode"));
    }
    this.log.setRejections(s.rejections);
    this.composerLabel.textContent = s.agent ? "Message to " + s.agent : "Message (this thread has no agent: nothing will answer)";
    this.updateComposer();
    this.updateRange();
  }

  // loadLineage shows the chain of fork sources of s, root first (at most
  // 16 levels), each a link to that thread as of the fork's sequence, with
  // "by reference" (the history is read from the source) and "source
  // erased" (a fork by reference whose source is gone) noted. Loaded once
  // per thread.
  async loadLineage(s) {
    if (!s.forked_from || this.lineageOf === this.id) return;
    this.lineageOf = this.id;
    const chain = [];
    let ref = s.forked_from;
    try {
      for (let i = 0; ref && i < 16; i++) {
        chain.unshift(ref);
        let src = null;
        try {
          src = await request(`/v1/threads/${enc(ref.thread)}`);
        } catch (e) {
          if (!(e instanceof ApiError && e.status === 404)) throw e;
        }
        ref = src && src.forked_from;
      }
    } catch (e) {
      return; // the lineage is a convenience: the header already names the source
    }
    if (this.destroyed || this.lineageOf !== this.id) return;
    const parts = ["Lineage: "];
    for (const r of chain) {
      parts.push(h("a", { href: `#/t/${enc(r.thread)}?audit=1&at=${r.seq}`, class: "lineage-link" }, r.thread),
        ` (seq ${r.seq}${r.by_reference ? ", by reference" : ""}${r.source_erased ? ", source erased" : ""}) › `);
    }
    parts.push(h("strong", {}, this.id));
    fill(this.lineage, ...parts);
    this.lineage.hidden = false;
  }

  updateComposer() {
    const past = this.viewSeq > 0;
    const dis = past || (this.head && this.head.deleted);
    this.text.disabled = dis;
    this.sendBtn.disabled = dis;
    this.composerHint.textContent = past ? "You are looking at the past: go back to the latest state to send."
      : this.head && this.head.deleted ? "This thread is deleted." : "Enter sends; Shift+Enter starts a new line.";
  }

  onStatus(s) {
    this.conn.className = "conn " + s.state;
    switch (s.state) {
      case CONNECTING: this.conn.textContent = "connecting…"; break;
      case OPEN:
        this.conn.textContent = "● live";
        if (s.resumedFrom !== null && s.resumedFrom !== undefined) {
          this.resumeNote.hidden = false;
          this.resumeNote.textContent = `Resumed after disconnect from event ${s.resumedFrom} (Last-Event-ID: ${s.resumedFrom}) at ` +
            new Date().toLocaleTimeString(undefined, { hour12: false }) + ".";
          // Deltas sent while disconnected are lost; the stored events are not.
          this.transcript.dropUnsettled();
          this.refresh();
        }
        break;
      case RECONNECTING:
        this.conn.textContent = `reconnecting in ${Math.ceil(s.delay / 1000)} s…`;
        this.conn.title = s.error || "";
        break;
      case FAILED:
        this.conn.textContent = "stream failed";
        this.ctx.notify("Live updates stopped: " + ((s.problem && (s.problem.detail || s.problem.title)) || "error"), "error");
        break;
      default:
        this.conn.textContent = "closed";
    }
  }

  onEvent(ev) {
    if (this.destroyed) return;
    let data;
    try { data = JSON.parse(ev.data); } catch { return; }
    switch (ev.type) {
      case "delta":
        if (this.viewSeq === 0) this.followEnd(() => this.transcript.applyDelta(data));
        return;
      case "shutdown":
        return; // the stream ends; it reconnects with Last-Event-ID
      case "error":
        this.ctx.notify("The live stream failed: " + (data.detail || data.title), "error");
        return;
    }
    // A durable event of the log.
    if (this.logLoaded) this.log.add([data]);
    else (this.pendingLog ||= []).push(data);
    if (data.type === "message.assistant" && data.payload && data.payload.reply_to) {
      this.transcript.settle(data.payload.reply_to, data.seq);
    }
    this.refresh();
  }

  // refresh re-reads the latest state (consistent: it includes every event
  // received so far). Calls while a read is in flight coalesce into one more.
  async refresh() {
    if (this.refreshing) {
      this.refreshAgain = true;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      do {
        this.refreshAgain = false;
        try {
          const s = await request(`/v1/threads/${enc(this.id)}?consistent=true`);
          if (this.destroyed) return;
          if (!this.head || s.version >= this.head.version) {
            this.head = s;
            this.renderHead();
            if (this.viewSeq === 0) this.followEnd(() => this.transcript.render(s, true));
          }
        } catch (e) {
          if (!this.destroyed) this.ctx.notify("Could not refresh the thread: " + (e.describe ? e.describe() : e), "error");
        }
      } while (this.refreshAgain && !this.destroyed);
    })();
    try { await this.refreshing; } finally { this.refreshing = null; }
  }

  // followEnd runs f (which changes the transcript) and keeps the end of
  // the page in view if the reader was there: a live chat follows new text.
  followEnd(f) {
    const atEnd = window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 120;
    f();
    if (atEnd) scrollToEnd();
  }

  composerKey(e) {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      this.composer.requestSubmit();
    }
  }

  async send(e) {
    e.preventDefault();
    const text = this.text.value.trim();
    if (!text || this.sendBtn.disabled) return;
    this.sendBtn.disabled = true;
    try {
      await request(`/v1/threads/${enc(this.id)}/events`, {
        method: "POST", headers: { "Idempotency-Key": uuid() },
        body: { events: [{ type: "message.user", producer: "webui", payload: { content: text } }] },
      });
      this.text.value = "";
      this.refresh();
    } catch (err) {
      this.ctx.notify("Not sent: " + (err.describe ? err.describe() : err), "error");
    } finally {
      this.updateComposer();
      this.text.focus();
    }
  }

  setAudit(on) {
    this.audit = on;
    this.auditBtn.setAttribute("aria-pressed", String(on));
    this.auditPane.hidden = !on;
    this.body.classList.toggle("with-audit", on);
    if (!on && this.viewSeq) this.showAt(0);
    this.updateHash();
    if (this.head) this.renderHead();
    if (on && !this.logLoaded && !this.loadingLog) this.loadLog();
    if (on) this.verifyIntegrity();
  }

  updateHash() {
    const q = new URLSearchParams();
    if (this.audit) q.set("audit", "1");
    if (this.viewSeq) q.set("at", String(this.viewSeq));
    const hash = `#/t/${enc(this.id)}` + (q.toString() ? "?" + q : "");
    if (location.hash !== hash) history.replaceState(null, "", hash);
  }

  // verifyIntegrity asks the server to re-read the thread and check it
  // against the signed checkpoints, and shows the verdict as a badge.
  async verifyIntegrity() {
    this.verifyBtn.disabled = true;
    this.integrity.className = "badge pending";
    this.integrity.textContent = "Integrity: checking…";
    this.integrityDetail.textContent = "";
    try {
      const r = await request(`/v1/threads/${enc(this.id)}/audit`);
      if (this.destroyed) return;
      const unsigned = r.unsigned_events ? `; ${r.unsigned_events} newer event(s) not yet checkpointed` : "";
      if (r.ok) {
        this.integrity.className = "badge ok";
        this.integrity.textContent = "Integrity: verified";
        this.integrityDetail.textContent = `${r.verified_events} event(s) match the signed checkpoints` + unsigned +
          (r.erased?.length ? "; erased earlier, as recorded" : "");
      } else {
        const p = r.problems?.[0];
        this.integrity.className = "badge error";
        this.integrity.textContent = `Integrity: FAILED at seq ${r.first_bad_seq}`;
        this.integrityDetail.textContent = p ? `${p.kind}: ${p.detail}` + (r.problem_count > 1 ? ` (and ${r.problem_count - 1} more)` : "") : "";
      }
    } catch (e) {
      if (this.destroyed) return;
      const off = e.problem?.code === "audit-off";
      this.integrity.className = off ? "badge muted" : "badge warn";
      this.integrity.textContent = off ? "Integrity: no checkpoints" : "Integrity: not checked";
      this.integrityDetail.textContent = off ? "this server signs no audit checkpoints" : String(e.message || e);
    } finally {
      this.verifyBtn.disabled = false;
    }
  }

  // loadLog reads the whole event log in pages of 1000, then merges the
  // events the stream delivered meanwhile.
  async loadLog() {
    this.loadingLog = true;
    this.logCaption.textContent = "Event log (loading…)";
    let after = 0;
    try {
      for (;;) {
        const page = await request(`/v1/threads/${enc(this.id)}/events?after=${after}&limit=1000`);
        if (this.destroyed) return;
        this.log.add(page.events);
        this.logCaption.textContent = `Event log (loading… ${this.log.size} events)`;
        if (!page.more || page.next_after <= after) break;
        after = page.next_after;
      }
    } catch (e) {
      this.ctx.notify("Could not load the event log: " + (e.describe ? e.describe() : e), "error");
      this.loadingLog = false;
      return;
    }
    this.logLoaded = true;
    this.loadingLog = false;
    if (this.pendingLog) this.log.add(this.pendingLog);
    this.pendingLog = null;
    this.log.select(this.viewSeq);
    this.updateRange();
  }

  // updateRange fits the slider to the log: one step per event.
  updateRange() {
    if (!this.logLoaded) return;
    const rej = this.log.rejections.size;
    this.logCaption.textContent = `Event log: ${this.log.size} events` + (rej ? `, ${rej} rejected` : "");
    const n = this.log.size;
    this.range.max = String(Math.max(0, n - 1));
    const idx = this.viewSeq ? this.log.indexOf(this.viewSeq) : n - 1;
    if (document.activeElement !== this.range || !this.viewSeq) this.range.value = String(Math.max(0, idx));
    this.describeRange();
  }

  describeRange() {
    const ev = this.log.at(Number(this.range.value));
    const text = ev ? `seq ${ev.seq} · ${ev.type}` + (this.viewSeq ? "" : " (latest)") : "no events";
    this.rangeOut.textContent = text;
    this.range.setAttribute("aria-valuetext", text);
    this.seqInput.placeholder = ev ? String(ev.seq) : "";
  }

  rangeMoved() {
    const ev = this.log.at(Number(this.range.value));
    if (!ev) return;
    const last = Number(this.range.value) === this.log.size - 1;
    this.describeRange();
    clearTimeout(this.rangeTimer);
    this.rangeTimer = setTimeout(() => this.showAt(last ? 0 : ev.seq), 120);
  }

  // showAt shows the thread as of seq (GET ?at_seq), or the latest state
  // for 0 or a sequence at or past the head.
  async showAt(seq, initial) {
    if (!this.head) return;
    if (seq >= this.head.version) seq = 0;
    const token = (this.showToken = (this.showToken || 0) + 1);
    if (seq === 0) {
      this.viewSeq = 0;
      this.asOf.hidden = true;
      this.transcript.render(this.head, true);
    } else {
      let s;
      try {
        s = await request(`/v1/threads/${enc(this.id)}?at_seq=${seq}`);
      } catch (e) {
        this.ctx.notify(`Cannot show seq ${seq}: ` + (e.describe ? e.describe() : e), "error");
        return;
      }
      if (token !== this.showToken || this.destroyed) return;
      this.viewSeq = seq;
      this.transcript.render(s, false);
      const n = s.message_count ?? (s.messages || []).length;
      fill(this.asOf,
        h("strong", {}, `As of seq ${seq}`), ` (${n} message${n === 1 ? "" : "s"}, last event at `, timeEl(s.updated_at, "clock"), "). Live updates continue in the log. ",
        h("button", { type: "button", class: "secondary", onclick: () => this.showAt(0) }, "Back to latest"));
      this.asOf.hidden = false;
    }
    this.forkHereBtn.textContent = seq ? `Fork from seq ${seq}` : "Fork from here";
    this.seqInput.value = seq ? String(seq) : "";
    if (this.logLoaded) this.log.select(seq);
    this.updateRange();
    this.updateComposer();
    this.updateHash();
    if (!initial) announce(this.sr, seq ? `Showing the thread as of sequence ${seq}` : "Showing the latest state");
  }

  async fork() {
    const at = this.viewSeq || (this.head && this.head.version) || 0;
    try {
      const th = await request(`/v1/threads/${enc(this.id)}/fork`, { method: "POST", body: { at_seq: at },
        headers: { "Idempotency-Key": uuid() } });
      this.ctx.notify(`Forked ${this.id} at seq ${at} into ${th.thread}.`, "ok");
      this.ctx.go(`#/t/${enc(th.thread)}` + (this.audit ? "?audit=1" : ""));
    } catch (e) {
      this.ctx.notify("Fork failed: " + (e.describe ? e.describe() : e), "error");
    }
  }

  exportClick(e, format) {
    e.preventDefault();
    download(`/v1/threads/${enc(this.id)}/export?format=${format}`, `${this.id}.${format}.jsonl`)
      .catch((err) => this.ctx.notify("Export failed: " + (err.describe ? err.describe() : err), "error"));
  }
}
