// The transcript: a thread's messages as a chat, tool calls paired with
// their results, and the assistant turns being generated (drafts, fed by
// live deltas).

import { h, clear, contentText, prettyJSON, timeEl } from "./dom.js";
import { markdown } from "./markdown.js";

// pairResults maps each assistant message's tool calls to their results:
// the first unused tool message after the call with the call's id (ids may
// repeat within a thread, so matching is positional, as in the fold).
// It returns {results: Map(msgIndex -> [result msg | null per call]),
// used: Set(tool msg index)}.
export function pairResults(messages) {
  const results = new Map(), used = new Set();
  messages.forEach((m, i) => {
    if (m.role !== "assistant" || !m.tool_calls || !m.tool_calls.length) return;
    const found = m.tool_calls.map((call) => {
      for (let j = i + 1; j < messages.length; j++) {
        const r = messages[j];
        if (r.role === "tool" && !used.has(j) && r.tool_call_id === call.id) {
          used.add(j);
          return r;
        }
        if (r.role === "assistant" && r.tool_calls && r.tool_calls.some((c) => c.id === call.id)) break;
      }
      return null;
    });
    results.set(i, found);
  });
  return { results, used };
}

// Transcript renders into an <ol>. Message elements are cached by a key of
// their content so re-renders keep the reader's place and open <details>.
export class Transcript {
  constructor(list, opts = {}) {
    this.list = list;
    this.agent = opts.agent || "";
    this.cache = new Map();
    this.drafts = new Map(); // "replyTo:step" -> draft
    this.live = true;
    this.version = 0;
  }

  // render shows state's messages; live says whether drafts are shown
  // (a time-travel view shows none).
  render(state, live) {
    this.live = live;
    this.version = state.version || 0;
    this.agent = state.agent || this.agent;
    const msgs = state.messages || [];
    const pending = new Set((state.pending || []).map((p) => p.id + ":" + p.seq));
    const { results, used } = pairResults(msgs);
    const next = new Map(), items = [];
    if (state.base > 0) {
      items.push(h("li", { class: "note" }, `${state.base} earlier messages are not shown.`));
    }
    msgs.forEach((m, i) => {
      if (used.has(i)) return;
      const res = results.get(i) || [];
      const key = [state.generation || 0, i, m.seq || 0, m.event_id || "",
        res.map((r) => (r ? r.seq || r.event_id || "r" : "-")).join(","),
        (m.tool_calls || []).map((c) => (pending.has(c.id + ":" + m.seq) ? "p" : "")).join("")].join("|");
      let el = this.cache.get(key);
      if (!el) el = this.message(m, res, pending);
      next.set(key, el);
      items.push(el);
    });
    this.cache = next;
    for (const [k, d] of this.drafts) {
      if (d.doneSeq && d.doneSeq <= this.version) this.drafts.delete(k);
    }
    if (live) for (const d of this.drafts.values()) items.push(d.el);
    if (!items.length) {
      items.push(h("li", { class: "note empty" }, live ? "No messages yet. Say something below." : "No messages at this point of the log."));
    }
    // Replace children only where they differ, so unchanged nodes stay put.
    let cur = this.list.firstChild;
    for (const el of items) {
      if (cur === el) {
        cur = cur.nextSibling;
        continue;
      }
      this.list.insertBefore(el, cur);
    }
    while (cur) {
      const n = cur.nextSibling;
      this.list.removeChild(cur);
      cur = n;
    }
  }

  // message builds one message element.
  message(m, results, pending) {
    const synthetic = m.synthetic ? h("span", { class: "badge muted" }, "synthetic") : null;
    const head = (who, cls, extra) => h("div", { class: "msg-head" },
      h("span", { class: ["who", cls] }, who), extra, synthetic,
      m.seq ? h("span", { class: "seq", title: "event " + (m.event_id || "") }, "seq " + m.seq) : null,
      m.time ? timeEl(m.time, "clock") : null);
    // Message text is rendered as markdown (static/js/markdown.js).
    const body = (c) => {
      const t = contentText(c);
      return t ? h("div", { class: "msg-body md" }, markdown(t)) : null;
    };
    const attrs = (role, label) => ({ class: ["msg", role, m.is_error && "error"], dataset: { seq: String(m.seq || 0), role },
      "aria-label": label });
    switch (m.role) {
      case "user":
        return h("li", attrs("user", "User message" + (m.seq ? ", seq " + m.seq : "")),
          head(m.name || "You", "user"), body(m.content));
      case "assistant": {
        const who = m.agent || m.name || this.agent || "assistant";
        const calls = (m.tool_calls || []).map((c, k) => this.toolCall(c, results[k], pending.has(c.id + ":" + m.seq)));
        return h("li", attrs("assistant", "Assistant " + who + (m.seq ? ", seq " + m.seq : "")),
          head(who, "assistant", m.model ? h("span", { class: "model muted" }, m.model) : null),
          m.reasoning ? reasoning(m.reasoning) : null,
          body(m.content),
          calls.length ? h("ul", { class: "tool-calls", "aria-label": "Tool calls" }, calls) : null);
      }
      case "tool":
        // A result whose call is not in view (e.g. after a compaction).
        return h("li", attrs("tool", "Tool result"), head("tool " + (m.name || m.tool_call_id || ""), "tool"),
          resultBlock(m));
      case "system":
        return h("li", attrs("system", "System message"), head("system", "system"), body(m.content));
      default:
        return h("li", attrs("other", m.role), head(m.role || "?", "other"), body(m.content));
    }
  }

  toolCall(call, result, isPending) {
    const state = result ? (result.is_error ? "error" : "ok") : isPending ? "pending" : "missing";
    return h("li", { class: ["tool-call", state], dataset: { callId: call.id || "" } },
      h("div", { class: "tool-head" },
        h("span", { class: "badge" }, "tool call"), " ",
        h("code", { class: "tool-name" }, call.name || "?"),
        h("span", { class: "call-id muted", title: "tool call id" }, call.id || "")),
      h("pre", { class: "args", "aria-label": "Arguments of " + (call.name || "the call") }, prettyJSON(call.arguments || "{}")),
      result ? resultBlock(result)
        : h("div", { class: "tool-result " + state }, h("span", { class: ["badge", state] },
          isPending ? "waiting for the result…" : "no result")));
  }

  // applyDelta adds a live token delta to the draft of its step.
  applyDelta(d) {
    const key = d.reply_to + ":" + d.step;
    let dr = this.drafts.get(key);
    if (dr && dr.finished && !dr.doneSeq && !d.done) {
      // The step streams again (its worker failed before storing it and
      // another one took over): start the draft over.
      dr.el.remove();
      this.drafts.delete(key);
      dr = null;
    }
    if (!dr) {
      if (d.done) return;
      dr = newDraft(d.agent || this.agent || "assistant");
      this.drafts.set(key, dr);
      if (this.live) {
        const empty = this.list.querySelector(".note.empty");
        if (empty) empty.remove();
        this.list.appendChild(dr.el);
      }
    }
    if (d.reasoning) {
      dr.reasoning.hidden = false;
      dr.reasoningText.data += d.reasoning;
    }
    if (d.content) {
      dr.body.hidden = false;
      dr.bodyText.data += d.content;
    }
    if (d.tool_call) {
      const tc = d.tool_call;
      let c = dr.calls.get(tc.index);
      if (!c) {
        c = { name: h("code", { class: "tool-name" }, ""), args: document.createTextNode("") };
        dr.calls.set(tc.index, c);
        dr.callList.hidden = false;
        dr.callList.appendChild(h("li", { class: "tool-call pending" },
          h("div", { class: "tool-head" }, h("span", { class: "badge" }, "tool call"), " ", c.name),
          h("pre", { class: "args" }, c.args)));
      }
      if (tc.name) c.name.textContent = tc.name;
      if (tc.arguments) c.args.data += tc.arguments;
    }
    if (d.done) {
      dr.finished = true;
      dr.el.setAttribute("aria-busy", "false");
      dr.el.classList.add("done");
      dr.status.textContent = "saving…";
    }
  }

  // settle marks the oldest draft answering replyTo as stored at seq; it
  // disappears once a render shows the thread at or past seq.
  settle(replyTo, seq) {
    let best = null;
    for (const [k, d] of this.drafts) {
      if (!k.startsWith(replyTo + ":") || d.doneSeq) continue;
      const step = Number(k.slice(replyTo.length + 1));
      if (!best || step < best.step) best = { d, step };
    }
    if (best) best.d.doneSeq = seq;
  }

  // dropUnsettled removes the drafts whose stored message has not arrived:
  // after a reconnect their missed tokens are lost, and the stored
  // message (or a fresh stream) replaces them.
  dropUnsettled() {
    for (const [k, d] of this.drafts) {
      if (!d.doneSeq) {
        d.el.remove();
        this.drafts.delete(k);
      }
    }
  }

  reset() {
    this.cache.clear();
    this.drafts.clear();
    clear(this.list);
  }
}

function reasoning(text) {
  return h("details", { class: "reasoning" }, h("summary", {}, "Reasoning"), h("div", { class: "reasoning-text" }, text));
}

function resultBlock(r) {
  const err = !!r.is_error;
  return h("div", { class: ["tool-result", err ? "error" : "ok"] },
    h("span", { class: ["badge", err ? "error" : "ok"] }, err ? "✗ error result" : "✓ result"),
    r.seq ? h("span", { class: "seq muted" }, "seq " + r.seq) : null,
    h("pre", { class: "result", "aria-label": err ? "Error result" : "Result" }, contentText(r.content)));
}

function newDraft(agent) {
  const reasoningText = document.createTextNode("");
  const bodyText = document.createTextNode("");
  const reasoningEl = h("details", { class: "reasoning", open: true, hidden: true }, h("summary", {}, "Reasoning"),
    h("div", { class: "reasoning-text" }, reasoningText));
  const body = h("div", { class: "msg-body", hidden: true }, bodyText);
  const callList = h("ul", { class: "tool-calls", hidden: true, "aria-label": "Tool calls" });
  const status = h("span", { class: "typing" }, "generating…");
  const el = h("li", { class: "msg assistant draft", "aria-busy": "true", "aria-label": "Assistant " + agent + ", answering" },
    h("div", { class: "msg-head" }, h("span", { class: "who assistant" }, agent), status),
    reasoningEl, body, callList);
  return { el, reasoning: reasoningEl, reasoningText, body, bodyText, callList, calls: new Map(), status, doneSeq: 0 };
}
