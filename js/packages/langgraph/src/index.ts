/**
 * @convlog/langgraph: a LangGraph.js checkpoint saver (`BaseCheckpointSaver`
 * of `@langchain/langgraph-checkpoint` 1.x) that keeps checkpoints in convlog.
 *
 * Layout: a LangGraph `thread_id` is a convlog thread of the same id (any
 * string: convlog maps ids outside `[A-Za-z0-9_-]{1,128}` and reports
 * both), created with `replies: "off"`, `pending_policy: "cancel"` and the
 * metadata `source` (default `"langgraph"`) that marks the saver's threads.
 * - `put` is one append: a `checkpoint.saved` event holding the whole
 *   checkpoint (its channel values, metadata and parent) and the graph's
 *   new messages (below).
 * - `putWrites` is one append: a `checkpoint.writes` event.
 * - Values are what LangGraph's serializer produced, as value objects:
 *   inline (`{type, json}` for JSON, `{type, base64}` for other bytes) up
 *   to {@link ConvlogSaverOptions.inlineBytes}, else `{type, blob, size}`,
 *   a blob of the thread named by the SHA-256 of the bytes, so a large
 *   value that does not change between checkpoints is stored once.
 * - convlog's fold indexes the newest checkpoints (namespace, id, parent,
 *   the sequences of their events) in the thread's snapshot, and the
 *   newest of each namespace with none among them;
 *   `getTuple` and `list` read them through
 *   `GET /v1/threads/{id}/checkpoints` (one request), and checkpoints older
 *   than the index are read from the log by the same route. A thread may
 *   hold any number of checkpoints.
 * - `list()` without a `thread_id` lists the tenant's threads whose
 *   metadata `source` is the saver's (convlog's thread list, updated by
 *   its projector; threads this saver wrote in this process are included
 *   at once).
 *
 * Messages: on `put` in the root namespace, the messages of the
 * `messages` channel that the parent checkpoint did not hold become the
 * thread's messages: a human message a user message, an AI message an
 * assistant message (with its tool calls), a tool message a tool result;
 * system and other messages are not copied. By default
 * (`messagesAs: "checkpoint"`) they travel inside the `checkpoint.saved`
 * event (its `payload.messages`) and convlog's fold appends them to the
 * history, so every put is a single-event append. With
 * `messagesAs: "events"` they are `message.user`, `message.assistant`
 * and `tool.result` events before the checkpoint in the same atomic
 * append, which costs more: an atomic append of several events is
 * staged and synced by the server on a single-replica stream. Either
 * way the thread's history (`GET /v1/threads/{id}`), web page and
 * exports show the conversation; SSE readers find the messages in
 * `checkpoint.saved`'s `payload.messages`, or as message events with
 * `"events"`. convlog's fold enforces tool-call matching: when it
 * refuses the messages (a tool result for a call that is not pending),
 * the checkpoint is appended without them. A graph run from an older
 * checkpoint (time travel) appends the messages of the new branch after
 * those already in the thread.
 *
 * Threads written by earlier versions of this package (an index in the
 * thread's key-value state, blobs `cp/...` and `ch/...`, a registry
 * thread `@convlog/langgraph:threads`) are not read: their checkpoints
 * stay in the log; delete such a thread (or use a new `thread_id`) to
 * start it in this layout, and delete the registry thread.
 *
 * Semantics follow `MemorySaver` (ordering newest first by checkpoint id,
 * `before`, `limit`, metadata `filter`, pending writes in `writesSortKey`
 * order, a write of a non-negative index stored once, pending sends of
 * v < 4 checkpoints migrated), so the official validation suite passes.
 *
 * @packageDocumentation
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";
import {
  BaseCheckpointSaver,
  JsonPlusSerializer,
  TASKS,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  copyCheckpoint,
  getCheckpointId,
  maxChannelVersion,
  writesSortKey,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
  type ChannelVersions,
} from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import { ConvlogClient, ConvlogError, type Event, type StoredCheckpoint } from "@convlog/client";

/** Options of {@link ConvlogSaver}. */
export interface ConvlogSaverOptions {
  /** The convlog client (its API key picks the tenant). */
  client: ConvlogClient;
  /** LangGraph's serializer (default: the saver's JSON+ serializer). */
  serde?: SerializerProtocol;
  /** The thread metadata `source` that marks this saver's threads for `list()` without a `thread_id`. Default `"langgraph"`. */
  source?: string;
  /** The largest serialized value kept inline in an event, in bytes; larger ones are blobs. Default {@link INLINE_VALUE_BYTES}. */
  inlineBytes?: number;
  /** The channel whose messages are copied to the thread's messages; `false` copies none. Default `"messages"`. */
  messagesChannel?: string | false;
  /**
   * How a put carries the new messages. `"checkpoint"` (default): inside
   * the `checkpoint.saved` event (its `payload.messages`), which convlog's
   * fold appends to the thread's history, so every put is a single-event
   * append. `"events"`: as `message.user`, `message.assistant` and
   * `tool.result` events in the same atomic append as the checkpoint,
   * which costs more (the server stages and syncs an atomic append of
   * several events on a single-replica stream). The thread's history,
   * web page and exports are the same either way; SSE readers find the
   * messages in `checkpoint.saved` events with `"checkpoint"` and as
   * message events with `"events"`.
   */
  messagesAs?: "events" | "checkpoint";
}

/** The default largest serialized value kept inline in an event, in bytes. */
export const INLINE_VALUE_BYTES = 64 << 10;

/** A serialized value as the events hold it (schemas/payloads/checkpoint.saved.json `value`). */
type Value = { type: string; json?: unknown; base64?: string; blob?: string; size?: number };
/** A value as put holds it: `raw` is the JSON text that goes into the event as `json`, unparsed. */
type OutValue = { type: string; raw?: string; base64?: string; blob?: string; size?: number };
type SavedPayload = { ns?: string; id: string; parent?: string; checkpoint: Value; metadata?: Value; channels?: Record<string, Value> };
type OutSaved = { ns?: string; id: string; parent?: string; checkpoint: OutValue; metadata?: OutValue; channels?: Record<string, OutValue> };
type WritesPayload = { ns?: string; checkpoint: string; task: string; path?: string; writes: { idx: number; channel: string; value: Value }[] };

const enc = new TextEncoder();
const dec = new TextDecoder();

/** The most blob names remembered as stored, per saver. */
const MAX_KNOWN_BLOBS = 10_000;
/** The most thread namespaces whose last checkpoint is remembered, and threads remembered as written. */
const MAX_REMEMBERED = 1_000;

/**
 * The most characters of JSON text one group of appends sends: at up to 3
 * UTF-8 bytes a character, under agentd's default request body limit
 * (`httpapi.DefaultMaxBodyBytes`, 1 MiB + 64 KiB), so grouping does not
 * make a body too large for it (a smaller limit answers 413, and the
 * group goes member by member). An append larger than this goes alone.
 */
const MAX_GROUP_CHARS = 256 << 10;
/** The most events one group of appends sends (convlog's atomic append takes up to 1,000: `client.MaxTurnEvents`). */
const MAX_GROUP_EVENTS = 200;

/** An append waiting in a thread's queue: its events' JSON text (list elements), their number, and its caller's promise. */
type Member = { list: string; count: number; resolve: () => void; reject: (err: unknown) => void };
/** A thread's appends: whether a group is in flight, and the appends waiting behind it, in call order. */
type Queue = { busy: boolean; waiting: Member[] };

/** A checkpoint as put remembers it: its id, channel versions, the value objects its event holds, and the ids of its messages. */
type Stored = { id: string; versions: ChannelVersions; channels: Record<string, OutValue>; messageIds?: Set<string> };

/**
 * The checkpoint saver. Methods throw {@link ConvlogError} for a request
 * convlog refused (with its problem: code, field, detail) and the fetch's
 * error when convlog cannot be reached (the client retries overload
 * answers, 429 and 503). Safe to share between graphs and concurrent runs
 * of different threads; concurrent `put`s on one thread are appended in
 * the order convlog receives them.
 */
export class ConvlogSaver extends BaseCheckpointSaver {
  private readonly client: ConvlogClient;
  private readonly source: string;
  private readonly inlineBytes: number;
  private readonly messagesChannel: string | false;
  private readonly messagesAs: "events" | "checkpoint";
  /** The last threads this process wrote (at most MAX_REMEMBERED): list() sees them before convlog's thread list does. */
  private readonly written = new Set<string>();
  /** Blob names (thread + name) known to be stored. */
  private readonly blobs = new Set<string>();
  /** The prefix of the placeholders body() replaces with raw JSON text (no event text holds it: it starts with NUL and is random). */
  private readonly nonce = `\u0000raw:${randomBytes(8).toString("hex")}:`;
  /** Per thread with appends queued or in flight: its queue (appends to one thread go one group at a time). */
  private readonly queues = new Map<string, Queue>();
  /** Per thread and namespace: the checkpoint last put or read. */
  private readonly last = new Map<string, Stored>();
  /** Whether the serializer is LangGraph's JSON+ serializer itself (whose output for a list is its elements' outputs joined), so lists go element by element. */
  private readonly elementwise: boolean;
  /** Per LangChain object of a list value (a message): its serialized text and its own fields (ownFields) when it was serialized. */
  private readonly texts = new WeakMap<object, { fields: string; text: string }>();

  constructor(opts: ConvlogSaverOptions) {
    super(opts.serde);
    this.client = opts.client;
    this.source = opts.source ?? "langgraph";
    this.inlineBytes = opts.inlineBytes ?? INLINE_VALUE_BYTES;
    this.messagesChannel = opts.messagesChannel ?? "messages";
    this.messagesAs = opts.messagesAs ?? "checkpoint";
    // The JSON+ serializer's `_dumps` (its bytes of one value) is not part
    // of its typed API: without it, lists go through `dumpsTyped` whole.
    this.elementwise = this.serde.constructor === JsonPlusSerializer && typeof (this.serde as unknown as { _dumps?: unknown })._dumps === "function";
  }

  /** The checkpoint of `config` (its `checkpoint_id`, else the newest of its namespace); undefined when there is none. */
  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id as string | undefined;
    if (threadId === undefined) return undefined;
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    const id = getCheckpointId(config);
    const page = await this.read(threadId, { ns, checkpoint_id: id || undefined, limit: 1 });
    if (page.length === 0) return undefined;
    return this.tuple(threadId, page[0], id ? config : undefined);
  }

  /** The checkpoints matching `config` and `options`, newest first per thread and namespace. */
  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    let { limit } = options ?? {};
    const { before, filter } = options ?? {};
    const threadId = config.configurable?.thread_id as string | undefined;
    const ns = config.configurable?.checkpoint_ns as string | undefined;
    const id = config.configurable?.checkpoint_id as string | undefined;
    const beforeId = before?.configurable?.checkpoint_id as string | undefined;
    const threads = threadId !== undefined ? [threadId] : await this.threadIds();
    // The messages of one call's checkpoints are mostly the same: each is
    // deserialized once per call (a list of n checkpoints of m messages
    // deserializes about m messages, not n * m).
    const memo = new Map<string, unknown>();
    for (const t of threads) {
      let cursor = beforeId;
      for (;;) {
        if (limit !== undefined && limit <= 0) return;
        const want = filter ? 100 : Math.min(limit ?? 100, 100);
        const page = await this.read(t, { ns, checkpoint_id: id || undefined, before: cursor, limit: want });
        for (const c of page) {
          const tuple = await this.tuple(t, c, undefined, memo);
          if (filter && !Object.entries(filter).every(([k, v]) => (tuple.metadata as Record<string, unknown> | undefined)?.[k] === v)) continue;
          if (limit !== undefined) {
            if (limit <= 0) return;
            limit -= 1;
          }
          yield tuple;
        }
        if (page.length < want || id) break;
        cursor = payloadOf<SavedPayload>(page[page.length - 1]).id;
      }
    }
  }

  /**
   * Stores a checkpoint, with the graph's new messages, in one atomic
   * append, and returns its config. The event holds the values of the
   * channels in `newVersions` and, for the others, the value objects the
   * parent checkpoint's event holds at the same version (a value is
   * serialized once, when its channel changes; LangGraph's Postgres saver
   * likewise stores a channel's value once per version).
   */
  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const threadId = config.configurable?.thread_id as string | undefined;
    if (threadId === undefined) throw new Error('@convlog/langgraph: put needs configurable.thread_id (graph.invoke(input, { configurable: { thread_id: "..." } }))');
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    const parent = config.configurable?.checkpoint_id as string | undefined;
    const cp = copyCheckpoint(checkpoint) as Checkpoint & { channel_values: Record<string, unknown> };
    const values = cp.channel_values ?? {};
    cp.channel_values = {};
    const prev = parent ? await this.previous(threadId, ns, parent) : undefined;
    const channels: Record<string, OutValue> = {};
    const [cv, mv] = await Promise.all([
      this.encode(threadId, cp),
      this.encode(threadId, metadata),
      ...Object.entries(values).map(async ([ch, v]) => {
        if (newVersions && ch in newVersions) channels[ch] = await this.encode(threadId, v);
        else if (prev?.channels[ch] !== undefined && prev.versions[ch] === checkpoint.channel_versions?.[ch]) channels[ch] = prev.channels[ch];
      }),
    ]);
    const payload: OutSaved = { id: checkpoint.id, checkpoint: cv, metadata: mv, channels };
    if (ns !== "") payload.ns = ns;
    if (parent) payload.parent = parent;
    const mirror = ns === "" && this.messagesChannel !== false && channels[this.messagesChannel] !== undefined;
    const list = mirror ? values[this.messagesChannel as string] : undefined;
    const news = mirror ? this.newMessages(prev?.messageIds ?? new Set(), list) : [];
    const saved = { type: "checkpoint.saved", id: uuidv7(), payload };
    let first: object[] = [saved];
    if (news.length > 0 && this.messagesAs === "checkpoint") first = [{ ...saved, payload: { ...payload, messages: news } }];
    else if (news.length > 0) first = [...news.map((m) => messageEventOf(m)), saved];
    const msgs = news;
    // Remembered before the append, so that a put of the next checkpoint
    // that starts meanwhile finds it; forgotten when the append fails.
    this.remember(threadId, ns, { id: checkpoint.id, versions: { ...checkpoint.channel_versions }, channels, messageIds: mirror ? messageIds(list) : undefined });
    try {
      try {
        await this.append(threadId, first);
      } catch (err) {
        // The fold refused the messages (a tool result for a call that is
        // not pending, a message too large): the checkpoint goes without.
        if (!(msgs.length > 0 && err instanceof ConvlogError && (err.status === 422 || err.status === 413))) throw err;
        await this.append(threadId, [saved]);
      }
    } catch (err) {
      if (this.last.get(`${threadId}\0${ns}`)?.id === checkpoint.id) this.last.delete(`${threadId}\0${ns}`);
      throw err;
    }
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  /** Stores a task's pending writes of a checkpoint in one append (readers keep the first write of a non-negative index). */
  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const threadId = config.configurable?.thread_id as string | undefined;
    const cp = config.configurable?.checkpoint_id as string | undefined;
    if (threadId === undefined) throw new Error("@convlog/langgraph: putWrites needs configurable.thread_id");
    if (cp === undefined) throw new Error("@convlog/langgraph: putWrites needs configurable.checkpoint_id");
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    const ws = await Promise.all(
      writes.map(async ([channel, value], i) => ({ idx: WRITES_IDX_MAP[channel] ?? i, channel, value: await this.encode(threadId, value) })),
    );
    const payload: { ns?: string; checkpoint: string; task: string; path?: string; writes: { idx: number; channel: string; value: OutValue }[] } = { checkpoint: cp, task: taskId, writes: ws };
    if (ns !== "") payload.ns = ns;
    if (taskPath) payload.path = taskPath;
    await this.append(threadId, [{ type: "checkpoint.writes", id: uuidv7(), payload }]);
  }

  /** The ids of the threads this saver's `list()` covers: the tenant's threads with its `source` metadata, and those it wrote in this process. */
  async threadIds(): Promise<string[]> {
    const out = new Set<string>();
    let cursor: string | undefined;
    do {
      const r = await this.client.api.GET("/v1/threads", {
        params: { query: { limit: 1000, cursor, [`metadata.source`]: this.source } as { limit: number; cursor?: string } },
      });
      if (r.error !== undefined || r.data === undefined) throw refused(r.response, r.error);
      for (const t of r.data.threads) {
        const id = t.external_id ?? t.thread;
        if (id !== undefined) out.add(id);
      }
      cursor = r.data.next_cursor ?? undefined;
    } while (cursor);
    for (const t of this.written) out.add(t);
    return [...out];
  }

  /** Deletes every checkpoint and write of the thread (a soft delete of its convlog thread: the id is free, the log keeps them). */
  async deleteThread(threadId: string): Promise<void> {
    try {
      await this.client.deleteThread(threadId);
    } catch (err) {
      if (!(err instanceof ConvlogError && err.status === 404)) throw err;
    }
    this.written.delete(threadId);
    for (const k of this.last.keys()) if (k.startsWith(`${threadId}\0`)) this.last.delete(k);
    for (const k of this.blobs) if (k.startsWith(`${threadId}\0`)) this.blobs.delete(k);
  }

  /** The checkpoints of the thread that `query` selects (none when the thread does not exist). */
  private async read(threadId: string, query: { ns?: string; checkpoint_id?: string; before?: string; limit: number }): Promise<StoredCheckpoint[]> {
    try {
      return (await this.client.checkpoints(threadId, query)).checkpoints;
    } catch (err) {
      if (err instanceof ConvlogError && err.status === 404) return [];
      throw err;
    }
  }

  /**
   * Appends events to the thread (one atomic append), creating the thread
   * first when it does not exist. The saver's appends to one thread are
   * sent one at a time, in call order: LangGraph writes a step's pending
   * writes while its checkpoint is being put, and concurrent appends to
   * one thread would only race for the thread's next version (convlog
   * checks each against the thread's state, and the loser checks again).
   *
   * Group commit: the appends that queue up behind one in flight go
   * together as one atomic append when it finishes (their events in call
   * order, at most {@link MAX_GROUP_CHARS} characters of body and
   * {@link MAX_GROUP_EVENTS} events), so a graph that does not await its
   * writes (durability "async") makes fewer requests. Each call settles
   * with its group. A group convlog refused (4xx: nothing was stored) is
   * sent again member by member, in order, so each call gets its own
   * answer; a group whose outcome is unknown (no answer, 5xx) is sent
   * again whole first: its event ids make convlog store it once.
   */
  private append(threadId: string, events: object[]): Promise<void> {
    const list = this.eventsText(events);
    return new Promise<void>((resolve, reject) => {
      let q = this.queues.get(threadId);
      if (q === undefined) {
        q = { busy: false, waiting: [] };
        this.queues.set(threadId, q);
      }
      q.waiting.push({ list, count: events.length, resolve, reject });
      if (!q.busy) void this.pump(threadId, q);
    });
  }

  /** Sends the thread's queued appends, a group at a time, until none is left. */
  private async pump(threadId: string, q: Queue): Promise<void> {
    q.busy = true;
    try {
      await this.drain(threadId, q);
    } finally {
      q.busy = false;
      if (this.queues.get(threadId) === q && q.waiting.length === 0) this.queues.delete(threadId);
    }
  }

  private async drain(threadId: string, q: Queue): Promise<void> {
    while (q.waiting.length > 0) {
      const group = [q.waiting.shift() as Member];
      let bytes = group[0].list.length;
      let count = group[0].count;
      while (q.waiting.length > 0) {
        const m = q.waiting[0];
        if (bytes + m.list.length + 1 > MAX_GROUP_CHARS || count + m.count > MAX_GROUP_EVENTS) break;
        group.push(q.waiting.shift() as Member);
        bytes += m.list.length + 1;
        count += m.count;
      }
      await this.sendGroup(threadId, group);
    }
  }

  /** Sends a group of queued appends as one atomic append and settles each member's promise. */
  private async sendGroup(threadId: string, group: Member[]): Promise<void> {
    const body = (ms: Member[]) => `{"events":[${ms.map((m) => m.list).join(",")}]}`;
    let err: unknown;
    try {
      await this.send(threadId, body(group));
      for (const m of group) m.resolve();
      return;
    } catch (e) {
      err = e;
    }
    if (group.length > 1 && !refusedWhole(err)) {
      // Unknown outcome: the same events again (stored once by their ids).
      try {
        await this.send(threadId, body(group));
        for (const m of group) m.resolve();
        return;
      } catch (e) {
        err = e;
      }
    }
    if (group.length === 1 || !refusedWhole(err)) {
      for (const m of group) m.reject(err);
      return;
    }
    for (const m of group) {
      try {
        await this.send(threadId, body([m]));
        m.resolve();
      } catch (e) {
        m.reject(e);
      }
    }
  }

  private async send(threadId: string, body: string): Promise<void> {
    try {
      await this.post(threadId, body);
    } catch (err) {
      if (!missing(err)) throw err;
      await this.ensure(threadId);
      await this.post(threadId, body);
    }
    if (!this.written.has(threadId)) {
      if (this.written.size >= MAX_REMEMBERED) this.written.delete(this.written.values().next().value as string);
      this.written.add(threadId);
    }
  }

  private async post(threadId: string, body: string): Promise<void> {
    await this.client.appendJSON(threadId, body);
  }

  /**
   * The JSON text of `events` as the elements of an append's `events`
   * list (without the brackets): value objects' `raw` JSON text goes in
   * as `json` as it is, not parsed and encoded again.
   */
  private eventsText(events: object[]): string {
    const raws: string[] = [];
    const text = JSON.stringify(events, (k, v) => {
      if (v && typeof v === "object" && typeof (v as OutValue).raw === "string" && typeof (v as OutValue).type === "string") {
        raws.push((v as OutValue).raw as string);
        return { type: (v as OutValue).type, json: `${this.nonce}${raws.length - 1}` };
      }
      return v;
    }).slice(1, -1);
    if (raws.length === 0) return text;
    // Each placeholder is a JSON string of its own: "<NUL>raw:<nonce>:<i>".
    const parts = text.split(JSON.stringify(this.nonce).slice(0, -1));
    let out = parts[0];
    for (let i = 1; i < parts.length; i++) {
      const end = parts[i].indexOf('"');
      const n = Number(parts[i].slice(0, end));
      out += raws[n] + parts[i].slice(end + 1);
    }
    return out;
  }

  private async ensure(threadId: string): Promise<void> {
    await this.client.ensureThread(threadId, { replies: "off", pending_policy: "cancel", metadata: { source: this.source } });
  }

  /** The value object of `v`: inline when its serialized bytes are small, else a blob named by their digest. */
  private async encode(threadId: string, v: unknown): Promise<OutValue> {
    const text = this.listText(v);
    if (text !== undefined) {
      // At most 3 UTF-8 bytes per UTF-16 code unit: most texts need no count.
      if (text.length * 3 <= this.inlineBytes || Buffer.byteLength(text) <= this.inlineBytes) return { type: "json", raw: text };
      return this.blobValue(threadId, "json", enc.encode(text));
    }
    const [type, bytes] = await this.serde.dumpsTyped(v);
    if (bytes.length > this.inlineBytes) return this.blobValue(threadId, type, bytes);
    if (type === "json") {
      // LangGraph's JSON serializer writes JSON text; anything else goes as bytes.
      const text = dec.decode(bytes);
      if (isJSONText(text)) return { type, raw: text };
    }
    return { type, base64: Buffer.from(bytes).toString("base64") };
  }

  /** The value object of serialized bytes stored as a blob of the thread, named by their SHA-256 (stored once per saver). */
  private async blobValue(threadId: string, type: string, bytes: Uint8Array): Promise<OutValue> {
    const blob = `lg/${createHash("sha256").update(bytes).digest("hex")}`;
    const key = `${threadId}\0${blob}`;
    if (!this.blobs.has(key)) {
      try {
        await this.client.putBlob(threadId, blob, bytes);
      } catch (err) {
        if (!missing(err)) throw err;
        await this.ensure(threadId);
        await this.client.putBlob(threadId, blob, bytes);
      }
      if (this.blobs.size >= MAX_KNOWN_BLOBS) this.blobs.clear();
      this.blobs.add(key);
    }
    return { type, blob, size: bytes.length };
  }

  /**
   * The JSON+ serializer's text of a list `v`, built from its elements'
   * texts: the text of a LangChain object (a message: it has `toJSON`) is
   * kept per object and used again while the object's own fields are
   * the same ({@link ownFields}), so a channel that grows by a message per step
   * serializes each message once, not on every step (LangChain's
   * `toJSON` is far costlier than plain `JSON.stringify` of the fields).
   * Undefined when `v` is not a list or the serializer is another.
   */
  private listText(v: unknown): string | undefined {
    if (!this.elementwise || !Array.isArray(v)) return undefined;
    const serde = this.serde as unknown as { _dumps(o: unknown): Uint8Array };
    const parts = new Array<string>(v.length);
    for (let i = 0; i < v.length; i++) {
      const el: unknown = v[i];
      const fields = el !== null && typeof el === "object" && typeof (el as { toJSON?: unknown }).toJSON === "function" ? ownFields(el) : undefined;
      if (fields !== undefined) {
        const got = this.texts.get(el as object);
        if (got !== undefined && got.fields === fields) {
          parts[i] = got.text;
          continue;
        }
      }
      // A function or symbol is `null` in a list, as JSON.stringify writes it.
      const text = dec.decode(serde._dumps(el)) || "null";
      if (fields !== undefined) this.texts.set(el as object, { fields, text });
      parts[i] = text;
    }
    return `[${parts.join(",")}]`;
  }

  private async decode(threadId: string, v: Value): Promise<unknown> {
    let bytes: Uint8Array;
    if (v.blob !== undefined) {
      const b = await this.client.getBlob(threadId, v.blob);
      if (b === undefined) throw new Error(`@convlog/langgraph: blob ${v.blob} of thread ${threadId} is missing`);
      bytes = b;
    } else if (v.base64 !== undefined) bytes = new Uint8Array(Buffer.from(v.base64, "base64"));
    else bytes = enc.encode(JSON.stringify(v.json ?? null));
    return this.serde.loadsTyped(v.type, bytes);
  }

  /**
   * The value of v, a JSON list, deserialized element by element, each
   * distinct element (by its JSON text) once per memo; any other value
   * as decode does. LangGraph's JSON serializer revives each element of a
   * list on its own, so the list is the one decode returns.
   */
  private async decodeList(threadId: string, v: Value, memo: Map<string, unknown>): Promise<unknown> {
    if (v.type !== "json" || v.base64 !== undefined) return this.decode(threadId, v);
    let list = v.json;
    if (v.blob !== undefined) {
      const b = await this.client.getBlob(threadId, v.blob);
      if (b === undefined) throw new Error(`@convlog/langgraph: blob ${v.blob} of thread ${threadId} is missing`);
      list = JSON.parse(dec.decode(b));
    }
    if (!Array.isArray(list)) return this.serde.loadsTyped(v.type, enc.encode(JSON.stringify(list ?? null)));
    return Promise.all(
      list.map((el) => {
        const text = JSON.stringify(el);
        let got = memo.get(text);
        if (got === undefined) {
          got = this.serde.loadsTyped("json", enc.encode(text));
          memo.set(text, got);
        }
        return got;
      }),
    );
  }

  /**
   * The tuple of a stored checkpoint. With `memo` (shared by the tuples of
   * one list call), the messages channel's messages are deserialized once
   * per distinct message: the tuples' lists are their own arrays holding
   * the same message objects.
   */
  private async tuple(threadId: string, c: StoredCheckpoint, config?: RunnableConfig, memo?: Map<string, unknown>): Promise<CheckpointTuple> {
    const p = payloadOf<SavedPayload>(c);
    const ns = p.ns ?? "";
    const [checkpoint, metadata, pendingWrites] = await Promise.all([
      this.decode(threadId, p.checkpoint) as Promise<Checkpoint>,
      p.metadata ? (this.decode(threadId, p.metadata) as Promise<CheckpointMetadata>) : Promise.resolve(undefined),
      this.writesOf(threadId, c),
    ]);
    const values: Record<string, unknown> = {};
    await Promise.all(
      Object.entries(p.channels ?? {}).map(async ([ch, v]) => {
        values[ch] = memo && ns === "" && ch === this.messagesChannel ? await this.decodeList(threadId, v, memo) : await this.decode(threadId, v);
      }),
    );
    (checkpoint as { channel_values: Record<string, unknown> }).channel_values = values;
    if (checkpoint.v < 4 && p.parent) await this.migratePendingSends(threadId, checkpoint, ns, p.parent);
    const msgs = ns === "" && this.messagesChannel !== false ? values[this.messagesChannel] : undefined;
    this.remember(threadId, ns, { id: p.id, versions: { ...checkpoint.channel_versions }, channels: outValues(p.channels), messageIds: msgs !== undefined ? messageIds(msgs) : undefined });
    const t: CheckpointTuple = {
      config: config ?? { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: p.id } },
      checkpoint,
      metadata,
      pendingWrites: pendingWrites.map((w) => [w.task, w.channel, w.value]),
    };
    if (p.parent) t.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: p.parent } };
    return t;
  }

  /**
   * The pending writes of a stored checkpoint, as MemorySaver keeps them:
   * a write of a task and non-negative index already stored by an earlier
   * call is skipped, a negative index replaces; in writesSortKey order.
   */
  private async writesOf(threadId: string, c: StoredCheckpoint): Promise<{ task: string; channel: string; value: unknown }[]> {
    const kept = new Map<string, { task: string; path: string; idx: number; channel: string; value: Value }>();
    for (const ev of c.writes) {
      const p = ev.payload as unknown as WritesPayload;
      const before = new Set(kept.keys());
      for (const w of p.writes) {
        const k = `${p.task},${w.idx}`;
        if (w.idx >= 0 && before.has(k)) continue;
        kept.set(k, { task: p.task, path: p.path ?? "", idx: w.idx, channel: w.channel, value: w.value });
      }
    }
    const ws = [...kept.values()].sort((a, b) => compareWritesSortKeys(writesSortKey(a.path, a.task, a.idx), writesSortKey(b.path, b.task, b.idx)));
    return Promise.all(ws.map(async (w) => ({ task: w.task, channel: w.channel, value: await this.decode(threadId, w.value) })));
  }

  private async migratePendingSends(threadId: string, cp: Checkpoint, ns: string, parent: string): Promise<void> {
    const page = await this.read(threadId, { ns, checkpoint_id: parent, limit: 1 });
    const sends = page.length === 0 ? [] : (await this.writesOf(threadId, page[0])).filter((w) => w.channel === TASKS).map((w) => w.value);
    const m = cp as { channel_values: Record<string, unknown>; channel_versions: ChannelVersions };
    m.channel_values ??= {};
    m.channel_values[TASKS] = sends;
    m.channel_versions ??= {};
    m.channel_versions[TASKS] = Object.keys(m.channel_versions).length > 0 ? maxChannelVersion(...Object.values(m.channel_versions)) : this.getNextVersion(undefined);
  }

  /** Remembers the checkpoint last put or read in a thread's namespace. */
  private remember(threadId: string, ns: string, c: Stored): void {
    const k = `${threadId}\0${ns}`;
    this.last.delete(k);
    if (this.last.size >= MAX_REMEMBERED) this.last.delete(this.last.keys().next().value as string);
    this.last.set(k, c);
  }

  /** The stored checkpoint `id` of the thread's namespace: remembered, else read (undefined when there is none). */
  private async previous(threadId: string, ns: string, id: string): Promise<Stored | undefined> {
    const c = this.last.get(`${threadId}\0${ns}`);
    if (c?.id === id) return c;
    const page = await this.read(threadId, { ns, checkpoint_id: id, limit: 1 });
    if (page.length === 0) return undefined;
    const p = payloadOf<SavedPayload>(page[0]);
    const cp = (await this.decode(threadId, p.checkpoint)) as Checkpoint;
    const channels = outValues(p.channels);
    const msgs = ns === "" && this.messagesChannel !== false ? p.channels?.[this.messagesChannel] : undefined;
    return { id, versions: cp.channel_versions ?? {}, channels, messageIds: msgs ? messageIds(await this.decode(threadId, msgs)) : undefined };
  }

  /** The convlog messages of the messages of `list` whose ids are not in `seen`. */
  private newMessages(seen: Set<string>, list: unknown): Message[] {
    const out: Message[] = [];
    if (!Array.isArray(list)) return out;
    for (const m of list) {
      const id = messageId(m);
      if (id !== undefined && seen.has(id)) continue;
      const msg = messageOf(m);
      if (msg) out.push(msg);
    }
    return out;
  }
}

/** The value objects of a read event as put holds them (`json` back to its text). */
function outValues(vs: Record<string, Value> | undefined): Record<string, OutValue> {
  const out: Record<string, OutValue> = {};
  for (const [k, v] of Object.entries(vs ?? {})) {
    const { json, ...rest } = v;
    out[k] = v.blob === undefined && v.base64 === undefined ? { ...rest, raw: JSON.stringify(json ?? null) } : rest;
  }
  return out;
}

/**
 * Whether text looks like one JSON value by its first character (a
 * serializer's "json" output is JSON text; parsing it again here would
 * double put's cost, and convlog refuses an event whose JSON is not).
 */
function isJSONText(text: string): boolean {
  return /^\s*[[{"tfn\-0-9]/.test(text);
}

/**
 * Whether err is convlog refusing an append (a 4xx answer): nothing of it
 * was stored. Any other failure (no answer, 5xx) leaves the outcome unknown.
 */
function refusedWhole(err: unknown): boolean {
  return err instanceof ConvlogError && err.status >= 400 && err.status < 500;
}

/**
 * A text that differs when an object's own enumerable fields differ:
 * strings and other primitives as they are, empty lists and objects as
 * such, other objects as their JSON (not of the object itself, so its
 * `toJSON` does not run). Of a LangChain object's `lc_kwargs` only the
 * keys count, and the values of keys the object has no field of: its
 * `toJSON` reads the object's fields for the others. Undefined when a
 * field does not serialize (a cycle, a BigInt).
 */
function ownFields(o: object): string | undefined {
  const obj = o as Record<string, unknown>;
  let s = "";
  try {
    for (const k of Object.keys(obj)) {
      const v = obj[k];
      if (typeof v === "string") s += `${k}:${v.length}:${v};`;
      else if (v === null || typeof v !== "object") s += `${k}=${String(v)};`;
      else if (k === "lc_kwargs" && !Array.isArray(v)) {
        s += `${k}{`;
        for (const kk of Object.keys(v)) s += kk in obj ? `${kk};` : `${kk}=${JSON.stringify((v as Record<string, unknown>)[kk])};`;
        s += "}";
      } else if (Array.isArray(v) ? v.length === 0 : Object.getPrototypeOf(v) === Object.prototype && Object.keys(v).length === 0) s += `${k}${Array.isArray(v) ? "[]" : "{}"};`;
      else s += `${k}=${JSON.stringify(v)};`;
    }
  } catch {
    return undefined;
  }
  return s;
}

/** The ConvlogError of a refused request (its problem body, or a minimal one). */
function refused(res: Response, body: unknown): ConvlogError {
  const problem = body && typeof body === "object" && "status" in body ? body : { type: "about:blank", title: res.statusText || "HTTP error", status: res.status };
  return new ConvlogError(res.status, problem as ConstructorParameters<typeof ConvlogError>[1]);
}

/** Whether err says the thread does not exist in a lifetime that takes writes (absent: 404; soft-deleted: 422 `deleted`): ensureThread starts one. */
function missing(err: unknown): boolean {
  return err instanceof ConvlogError && (err.status === 404 || (err.status === 422 && err.problem.code === "deleted"));
}

/** The payload of a stored checkpoint's `checkpoint.saved` event. */
function payloadOf<T>(c: StoredCheckpoint): T {
  return c.event.payload as unknown as T;
}

type LcMessage = {
  id?: string;
  name?: string;
  content?: unknown;
  tool_calls?: { id?: string; name: string; args?: unknown }[];
  tool_call_id?: string;
  status?: string;
  getType?: () => string;
  _getType?: () => string;
};

function messageId(m: unknown): string | undefined {
  const id = (m as LcMessage | null)?.id;
  return typeof id === "string" && id !== "" ? id : undefined;
}

function messageIds(list: unknown): Set<string> {
  const out = new Set<string>();
  if (Array.isArray(list)) for (const m of list) {
    const id = messageId(m);
    if (id !== undefined) out.add(id);
  }
  return out;
}

/** The text of a LangChain message's content: a string as it is, text parts joined, anything else as JSON. */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    const texts = content.filter((p) => p && typeof p === "object" && (p as { type?: string }).type === "text").map((p) => String((p as { text?: unknown }).text ?? ""));
    if (texts.length === content.length) return texts.join("\n");
  }
  return content === undefined || content === null ? "" : JSON.stringify(content);
}

/** A history message as convlog's events carry it (openapi.json `Message`, without seq, event_id, time). */
type Message = {
  role: "user" | "assistant" | "tool";
  content: string;
  name?: string;
  tool_calls?: { id: string; name: string; arguments: string }[];
  tool_call_id?: string;
  is_error?: boolean;
  metadata?: Record<string, unknown>;
};

/** The convlog message of a LangChain message (human, ai, tool), or undefined for other kinds. */
function messageOf(raw: unknown): Message | undefined {
  const m = raw as LcMessage | null;
  if (!m || typeof m !== "object") return undefined;
  const kind = typeof m.getType === "function" ? m.getType() : typeof m._getType === "function" ? m._getType() : undefined;
  const metadata = m.id ? { langgraph_id: m.id } : undefined;
  const name = typeof m.name === "string" && m.name !== "" ? m.name : undefined;
  switch (kind) {
    case "human":
      return { role: "user", content: textOf(m.content), name, metadata };
    case "ai": {
      const calls = (m.tool_calls ?? []).filter((c) => typeof c.id === "string" && c.id !== "");
      const out: Message = { role: "assistant", content: textOf(m.content), name, metadata };
      if (calls.length > 0) out.tool_calls = calls.map((c) => ({ id: c.id as string, name: c.name, arguments: JSON.stringify(c.args ?? {}) }));
      return out;
    }
    case "tool":
      if (!m.tool_call_id) return undefined;
      return { role: "tool", content: textOf(m.content), name, tool_call_id: m.tool_call_id, is_error: m.status === "error" || undefined };
  }
  return undefined;
}

/** The message event that appends m (`message.user`, `message.assistant`, `tool.result`). */
function messageEventOf(m: Message): Event {
  switch (m.role) {
    case "user":
      return { type: "message.user", id: uuidv7(), payload: { content: m.content, name: m.name, metadata: m.metadata } } as Event;
    case "assistant":
      return { type: "message.assistant", id: uuidv7(), payload: { content: m.content, name: m.name, metadata: m.metadata, tool_calls: m.tool_calls } } as Event;
    case "tool":
      return { type: "tool.result", id: uuidv7(), payload: { tool_call_id: m.tool_call_id, name: m.name, content: m.content, is_error: m.is_error } } as Event;
  }
}

/**
 * A UUIDv7 (RFC 9562): 48 bits of Unix ms, the version, then the random
 * bits of a `randomUUID()` (a v4, whose variant bits v7 shares); convlog's
 * event ids. `randomUUID` draws from a cached pool of random bytes.
 */
function uuidv7(): string {
  const r = randomUUID();
  const ms = Date.now().toString(16).padStart(12, "0");
  return `${ms.slice(0, 8)}-${ms.slice(8, 12)}-7${r.slice(15)}`;
}
