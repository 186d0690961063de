// The audit log: a thread's raw events in sequence order, rejected events
// highlighted with the fold's reason, and the sequence shown by time travel
// marked.

import { h, prettyJSON, timeEl } from "./dom.js";

export class EventLog {
  // tbody is the table body to fill; onPick(seq) is called when the reader
  // picks an event (to see the thread as of it).
  constructor(tbody, onPick) {
    this.tbody = tbody;
    this.onPick = onPick;
    this.events = []; // sorted by seq
    this.rows = new Map(); // seq -> <tr>
    this.rejections = new Map(); // seq -> rejection
    this.selected = 0;
  }

  get size() { return this.events.length; }
  get lastSeq() { return this.events.length ? this.events[this.events.length - 1].seq : 0; }
  seqs() { return this.events.map((e) => e.seq); }
  at(i) { return this.events[i]; }

  // indexOf returns the index of the last event at or before seq (-1 if none).
  indexOf(seq) {
    let lo = 0, hi = this.events.length - 1, ans = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.events[mid].seq <= seq) { ans = mid; lo = mid + 1; } else hi = mid - 1;
    }
    return ans;
  }

  // add inserts events (JSON objects with seq) it does not have yet; it
  // returns how many were new.
  add(evs) {
    let added = 0;
    for (const ev of evs) {
      if (!ev || !ev.seq || this.rows.has(ev.seq)) continue;
      const row = this.row(ev);
      this.rows.set(ev.seq, row);
      const i = this.indexOf(ev.seq) + 1;
      if (i === this.events.length) {
        this.events.push(ev);
        this.tbody.appendChild(row);
      } else {
        this.events.splice(i, 0, ev);
        this.tbody.insertBefore(row, this.rows.get(this.events[i + 1].seq));
      }
      this.mark(ev.seq);
      added++;
    }
    return added;
  }

  // setRejections records the thread's rejections (the fold keeps the most
  // recent ones with their reasons).
  setRejections(list) {
    const old = this.rejections;
    this.rejections = new Map((list || []).map((r) => [r.seq, r]));
    for (const seq of new Set([...old.keys(), ...this.rejections.keys()])) this.mark(seq);
  }

  // select marks seq as the sequence shown (0 = the latest; nothing is
  // marked as in the future).
  select(seq) {
    this.selected = seq;
    for (const ev of this.events) this.mark(ev.seq);
    const row = this.rows.get(seq);
    if (row) row.scrollIntoView({ block: "nearest" });
  }

  row(ev) {
    const typeCell = h("td", { class: "type" }, h("code", {}, ev.type || "?"));
    if (ev.error) typeCell.appendChild(h("div", { class: "reject-reason" }, "cannot decode: " + ev.error));
    if (ev.payload !== undefined) {
      typeCell.appendChild(h("details", { class: "payload" }, h("summary", {}, "payload"),
        h("pre", {}, prettyJSON(ev.payload))));
    }
    const pick = h("button", { type: "button", class: "linkish", "aria-label": "Show the thread as of sequence " + ev.seq,
      onclick: () => this.onPick(ev.seq) }, String(ev.seq));
    return h("tr", { dataset: { seq: String(ev.seq), type: ev.type || "" } },
      h("th", { scope: "row", class: "seq" }, pick),
      h("td", { class: "time" }, timeEl(ev.time || ev.stored_at, "clock")),
      typeCell,
      h("td", { class: "producer" }, ev.producer || ""),
      h("td", { class: "eid" }, h("code", { title: ev.correlation_id ? "correlation " + ev.correlation_id : null }, ev.id || "")));
  }

  // mark updates a row's rejected / selected / future state. A rejected
  // event gets a second row that says the fold's code and reason.
  mark(seq) {
    const row = this.rows.get(seq);
    if (!row) return;
    const rej = this.rejections.get(seq);
    row.classList.toggle("rejected", !!rej);
    let detail = row.nextElementSibling && row.nextElementSibling.classList.contains("rejection") ? row.nextElementSibling : null;
    if (rej && !detail) {
      detail = h("tr", { class: "rejection", dataset: { seq: String(seq) } },
        h("td", { colspan: "5", class: "reject-reason fold" },
          h("strong", {}, "Rejected"), ` (${rej.code || "rejected"}): ${rej.reason || ""}`));
      row.after(detail);
    } else if (!rej && detail) {
      detail.remove();
      detail = null;
    }
    const selected = this.selected > 0 && seq === this.selected;
    const future = this.selected > 0 && seq > this.selected;
    for (const r of [row, detail]) {
      if (!r) continue;
      r.classList.toggle("selected", selected);
      r.classList.toggle("future", future);
    }
    if (selected) row.setAttribute("aria-current", "true");
    else row.removeAttribute("aria-current");
  }
}
