// The thread list: the tenant's threads, newest first, with filters,
// paging by cursor, open-by-id and "new thread".

import { ApiError, request, enc } from "./api.js";
import { h, clear, fill, timeEl, shortID, sourceTitle } from "./dom.js";

// listView renders the list into main. params: URLSearchParams of the
// fragment (agent, owner, meta = "k=v, k2=v2"). ctx: {notify, go}.
export function listView(main, params, ctx) {
  const v = new ListView(main, params, ctx);
  v.start();
  return v;
}

// parseMeta turns "k=v, k2=v2" into [[k, v], ...]; it throws on a pair
// without "=".
export function parseMeta(text) {
  const out = [];
  for (const part of (text || "").split(",")) {
    const p = part.trim();
    if (!p) continue;
    const i = p.indexOf("=");
    if (i <= 0) throw new Error(`metadata filter "${p}" is not key=value`);
    out.push([p.slice(0, i).trim(), p.slice(i + 1).trim()]);
  }
  return out;
}

class ListView {
  constructor(main, params, ctx) {
    this.main = main;
    this.ctx = ctx;
    this.filters = { agent: params.get("agent") || "", owner: params.get("owner") || "", meta: params.get("meta") || "" };
    this.cursors = [""]; // cursor of each page seen; the last is the current page
    this.threads = [];
    this.build();
  }

  build() {
    const f = this.filters;
    const field = (id, label, value, attrs = {}) => h("div", { class: "field" },
      h("label", { for: id }, label), h("input", { id, name: id, value, autocomplete: "off", ...attrs }));
    this.agentList = h("datalist", { id: "agent-options" });
    this.filterForm = h("form", { class: "filters", role: "search", "aria-label": "Filter threads", onsubmit: (e) => this.applyFilters(e) },
      field("f-agent", "Agent", f.agent, { list: "agent-options" }),
      field("f-owner", "Owner", f.owner),
      field("f-meta", "Metadata (key=value, …)", f.meta, { placeholder: "source=import" }),
      h("div", { class: "field actions" },
        h("button", { type: "submit" }, "Filter"),
        h("button", { type: "button", class: "secondary", id: "clear-filters", onclick: () => this.ctx.go("#/") }, "Clear")),
      this.agentList);

    this.idInput = h("input", { id: "f-id", name: "id", autocomplete: "off", spellcheck: "false",
      "aria-describedby": "f-id-hint", oninput: () => this.renderRows() });
    this.idForm = h("form", { class: "filters idsearch", role: "search", "aria-label": "Find a thread by id", onsubmit: (e) => this.openByID(e) },
      h("div", { class: "field grow" }, h("label", { for: "f-id" }, "Thread id"), this.idInput),
      h("div", { class: "field actions" }, h("button", { type: "submit", class: "secondary" }, "Open")),
      h("p", { class: "hint muted", id: "f-id-hint" }, "Typing filters this page; Open looks the id up."));

    this.newAgent = h("select", { id: "new-agent", name: "agent", required: true });
    this.newTitle = h("input", { id: "new-title", name: "title", autocomplete: "off" });
    this.newOwner = h("input", { id: "new-owner", name: "owner", autocomplete: "off" });
    this.newForm = h("form", { class: "new-thread", id: "new-thread-form", hidden: true, "aria-label": "New thread", onsubmit: (e) => this.create(e) },
      h("div", { class: "field" }, h("label", { for: "new-agent" }, "Agent"), this.newAgent),
      h("div", { class: "field grow" }, h("label", { for: "new-title" }, "Title (optional)"), this.newTitle),
      h("div", { class: "field" }, h("label", { for: "new-owner" }, "Owner (optional)"), this.newOwner),
      h("div", { class: "field actions" }, h("button", { type: "submit", id: "create-thread" }, "Create"),
        h("button", { type: "button", class: "secondary", onclick: () => this.toggleNew(false) }, "Cancel")));
    this.newBtn = h("button", { type: "button", id: "new-thread", "aria-expanded": "false", "aria-controls": "new-thread-form",
      onclick: () => this.toggleNew(this.newForm.hidden) }, "New thread");

    this.status = h("p", { class: "muted", role: "status", id: "list-status" }, "Loading threads…");
    this.tbody = h("tbody");
    this.prevBtn = h("button", { type: "button", class: "secondary", id: "prev-page", disabled: true, onclick: () => this.page(-1) }, "← Newer");
    this.nextBtn = h("button", { type: "button", class: "secondary", id: "next-page", disabled: true, onclick: () => this.page(1) }, "Older →");
    this.pageLabel = h("span", { class: "muted" }, "");

    clear(this.main).appendChild(h("section", { class: "list" },
      h("div", { class: "list-head" }, h("h1", { tabindex: "-1" }, "Threads"),
        h("div", { class: "row" }, h("button", { type: "button", class: "secondary", id: "refresh-list", onclick: () => this.load() }, "Refresh"), this.newBtn)),
      this.newForm,
      h("div", { class: "filter-bar" }, this.filterForm, this.idForm),
      this.status,
      // The table scrolls sideways inside its wrapper on narrow screens; the
      // wrapper is focusable so that the keyboard can scroll it too.
      h("div", { class: "table-wrap", id: "thread-list-wrap", tabindex: "0", role: "region", "aria-label": "Threads (scrolls sideways)" },
        h("table", { class: "threads", id: "thread-list" },
        h("caption", { class: "visually-hidden" }, "Threads, most recently updated first"),
        h("thead", {}, h("tr", {},
          h("th", { scope: "col" }, "Thread"), h("th", { scope: "col" }, "Agent"), h("th", { scope: "col" }, "Owner"),
          h("th", { scope: "col", class: "num" }, "Messages"), h("th", { scope: "col", class: "num" }, "Version"),
          h("th", { scope: "col" }, "Updated"), h("th", { scope: "col" }, "Notes"))),
        this.tbody)),
      h("nav", { class: "pager row", "aria-label": "Pages" }, this.prevBtn, this.pageLabel, this.nextBtn)));
    this.main.querySelector("h1").focus({ preventScroll: true });
  }

  destroy() {}

  async start() {
    this.loadModels();
    await this.load();
  }

  async loadModels() {
    try {
      const m = await request("/v1/models");
      const names = (m.data || []).map((x) => x.id);
      fill(this.newAgent, names.map((n) => h("option", { value: n }, n)));
      fill(this.agentList, names.map((n) => h("option", { value: n })));
      if (!names.length) this.newAgent.append(h("option", { value: "" }, "(no agents served)"));
    } catch (e) {
      this.ctx.notify("Could not list the agents: " + (e.describe ? e.describe() : e), "error");
    }
  }

  query() {
    const q = new URLSearchParams();
    if (this.filters.agent) q.set("agent", this.filters.agent);
    if (this.filters.owner) q.set("owner", this.filters.owner);
    for (const [k, v] of parseMeta(this.filters.meta)) q.set("metadata." + k, v);
    q.set("limit", "25");
    const cur = this.cursors[this.cursors.length - 1];
    if (cur) q.set("cursor", cur);
    return q;
  }

  async load() {
    let q;
    try {
      q = this.query();
    } catch (e) {
      this.status.textContent = String(e.message);
      return;
    }
    this.status.textContent = "Loading threads…";
    try {
      const page = await request("/v1/threads?" + q);
      this.threads = page.threads || [];
      this.nextCursor = page.next_cursor || "";
    } catch (e) {
      this.threads = [];
      this.nextCursor = "";
      this.status.textContent = "Could not load the threads: " + (e.describe ? e.describe() : e);
      this.renderRows(true);
      return;
    }
    this.renderRows();
  }

  renderRows(failed) {
    const needle = this.idInput.value.trim().toLowerCase();
    const rows = this.threads.filter((t) => !needle || t.thread.toLowerCase().includes(needle) || (t.title || "").toLowerCase().includes(needle));
    fill(this.tbody, rows.map((t) => this.row(t)));
    const n = this.cursors.length;
    this.prevBtn.disabled = n <= 1;
    this.nextBtn.disabled = !this.nextCursor;
    this.pageLabel.textContent = "Page " + n;
    if (failed) return;
    const filtered = this.filters.agent || this.filters.owner || this.filters.meta;
    if (!this.threads.length) {
      this.status.textContent = filtered ? "No thread matches these filters." : "No threads yet. Create one with New thread.";
    } else {
      this.status.textContent = `${rows.length} thread${rows.length === 1 ? "" : "s"}` +
        (needle ? ` whose id or title contains "${needle}"` : "") + (this.nextCursor ? " on this page" : "") + ", most recently updated first.";
    }
  }

  // row shows a thread: its title (or, for an untitled imported thread,
  // its source), the id shortened (full id on hover), and notes. The
  // metadata's source_meta (a JSON document of the import) is not a note:
  // it is in the source badge's tooltip.
  row(t) {
    const md = t.metadata || {};
    const notes = [];
    if (t.pending) notes.push(h("span", { class: "badge warn" }, `${t.pending} pending`));
    if (t.rejected) notes.push(h("span", { class: "badge error" }, `${t.rejected} rejected`));
    if (t.deleted) notes.push(h("span", { class: "badge muted" }, "deleted"));
    if (t.forked_from) notes.push(h("span", { class: "badge", title: `forked from ${t.forked_from.thread} at seq ${t.forked_from.seq}` }, "fork"));
    for (const [k, v] of Object.entries(md)) {
      if (k === "source_meta" || k === "source_id") continue;
      const tip = k === "source" ? [`${k}=${v}`, md.source_id && `source_id=${md.source_id}`, md.source_meta && `source_meta=${md.source_meta}`]
        .filter(Boolean).join("\n") : `${k}=${v}`;
      notes.push(h("span", { class: "badge muted meta-note", title: tip }, `${k}=${v}`));
    }
    const title = t.title || sourceTitle(md);
    return h("tr", { dataset: { thread: t.thread } },
      h("td", { class: "title" },
        h("a", { href: `#/t/${enc(t.thread)}`, title: title ? null : t.thread }, title || shortID(t.thread)),
        title ? h("div", { class: "muted mono small thread-id", title: t.thread }, shortID(t.thread)) : null),
      h("td", {}, t.agent || h("span", { class: "muted" }, "—")),
      h("td", {}, t.owner || h("span", { class: "muted" }, "—")),
      h("td", { class: "num count" }, String(t.message_count || 0)),
      h("td", { class: "num" }, String(t.version)),
      h("td", { class: "updated" }, timeEl(t.updated_at)),
      h("td", {}, h("div", { class: "notes" }, notes)));
  }

  applyFilters(e) {
    e.preventDefault();
    const fd = new FormData(this.filterForm);
    const meta = String(fd.get("f-meta") || "").trim();
    try {
      parseMeta(meta);
    } catch (err) {
      this.status.textContent = err.message;
      return;
    }
    const q = new URLSearchParams();
    for (const [k, name] of [["agent", "f-agent"], ["owner", "f-owner"]]) {
      const v = String(fd.get(name) || "").trim();
      if (v) q.set(k, v);
    }
    if (meta) q.set("meta", meta);
    this.ctx.go("#/" + (q.toString() ? "?" + q : ""));
  }

  page(dir) {
    if (dir > 0 && this.nextCursor) this.cursors.push(this.nextCursor);
    if (dir < 0 && this.cursors.length > 1) this.cursors.pop();
    this.load();
  }

  async openByID(e) {
    e.preventDefault();
    const id = this.idInput.value.trim();
    if (!id) return;
    try {
      await request(`/v1/threads/${enc(id)}`);
      this.ctx.go(`#/t/${enc(id)}`);
    } catch (err) {
      const msg = err instanceof ApiError && (err.status === 404 || err.status === 400) ? `No thread with id "${id}".` : "Lookup failed: " + (err.describe ? err.describe() : err);
      this.status.textContent = msg;
    }
  }

  toggleNew(open) {
    this.newForm.hidden = !open;
    this.newBtn.setAttribute("aria-expanded", String(open));
    if (open) this.newAgent.focus();
    else this.newBtn.focus();
  }

  async create(e) {
    e.preventDefault();
    const body = { agent: this.newAgent.value };
    if (this.newTitle.value.trim()) body.title = this.newTitle.value.trim();
    if (this.newOwner.value.trim()) body.owner = this.newOwner.value.trim();
    try {
      const th = await request("/v1/threads", { method: "POST", body });
      this.ctx.go(`#/t/${enc(th.thread)}`);
    } catch (err) {
      this.ctx.notify("Could not create the thread: " + (err.describe ? err.describe() : err), "error");
    }
  }
}
