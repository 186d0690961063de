/**
 * @convlog/langgraph: a LangGraph.js checkpoint saver (`BaseCheckpointSaver`
 * of `@langchain/langgraph-checkpoint` 1.x) that keeps checkpoints in convlog.
 *
 * Layout: a LangGraph `thread_id` is a convlog thread of the same id (any
 * string: convlog maps ids outside `[A-Za-z0-9_-]{1,128}` and reports
 * both). In its key-value state (read without the history, written by
 * `state.set` events, so every change is in the log):
 * - `cp:<sha256 of [ns, id]>` → `{ns, id, parent, metadata: [type, base64]}`,
 *   one small index entry per checkpoint; the serialized checkpoint (without
 *   its channel values) is the blob `cp/<same hash>` and each channel value
 *   a put updated (`newVersions`) the blob `ch/<sha256 of [ns, channel,
 *   version]>`, stored once per version as LangGraph's Postgres saver does
 *   (convlog's object store, up to 32 MiB each by default: a checkpoint may
 *   be larger than an event);
 * - `w:<sha256 of [ns, checkpoint id, task id, idx]>` → one pending write
 *   `{ns, cp, task, idx, channel, path, type, value}` (the value inline up
 *   to 4 KiB, else in the blob `w/<same hash>`).
 * A registry thread (default `"@convlog/langgraph:threads"`) lists the
 * thread ids for `list()` without a `thread_id`. `deleteThread` soft-deletes
 * the convlog thread: the id is free again (a new lifetime starts empty)
 * and the deleted checkpoints stay in the log for audit.
 *
 * Limits: the index lives in the thread's state, capped by convlog at
 * 256 KiB per thread (about 800 checkpoints with small metadata): a
 * longer-lived thread gets a 422 from convlog's fold (state too large).
 *
 * Semantics follow `MemorySaver` (ordering newest first by checkpoint id,
 * `before`, `limit`, metadata `filter`, pending writes in `writesSortKey`
 * order, a write of a non-negative index stored once, pending sends of
 * v < 4 checkpoints migrated), so the official validation suite passes.
 *
 * @packageDocumentation
 */
import { createHash } from "node:crypto";
import {
  BaseCheckpointSaver,
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
import { ConvlogClient, ConvlogError, type Event } from "@convlog/client";

/** Options of {@link ConvlogSaver}. */
export interface ConvlogSaverOptions {
  /** The convlog client (its API key picks the tenant). */
  client: ConvlogClient;
  /** The thread that registers the saver's thread ids for `list()` without a thread. Default `"@convlog/langgraph:threads"`. */
  registryThread?: string;
  /** LangGraph's serializer (default: the saver's JSON+ serializer). */
  serde?: SerializerProtocol;
}

/** The largest pending-write value kept inline in the state, in bytes of its serialized form; larger ones go to a blob. */
export const INLINE_WRITE_BYTES = 4096;

type CpEntry = { ns: string; id: string; parent: string | null; metadata: [string, string] };
type WEntry = { ns: string; cp: string; task: string; idx: number; channel: string; path: string; type: string; value?: string; blob?: string };

const hash = (parts: unknown[]) => createHash("sha256").update(JSON.stringify(parts)).digest("hex");
const b64 = (b: Uint8Array) => Buffer.from(b).toString("base64");
const unb64 = (s: string) => new Uint8Array(Buffer.from(s, "base64"));

/**
 * The checkpoint saver. Methods throw {@link ConvlogError} for a request
 * convlog refused (with its problem: code, field, detail) and the fetch's
 * error when convlog cannot be reached. Safe to share between graphs and
 * concurrent runs of different threads; concurrent `put`s on one thread
 * are appended in the order convlog receives them.
 */
export class ConvlogSaver extends BaseCheckpointSaver {
  private readonly client: ConvlogClient;
  private readonly registry: string;
  /** Thread ids this process created (or saw) in their current lifetime. */
  private readonly ensured = new Set<string>();

  constructor(opts: ConvlogSaverOptions) {
    super(opts.serde);
    this.client = opts.client;
    this.registry = opts.registryThread ?? "@convlog/langgraph:threads";
  }

  private async ensure(threadId: string): Promise<void> {
    if (this.ensured.has(threadId)) return;
    await this.client.ensureThread(threadId, { replies: "off", metadata: { source: "langgraph" } });
    await this.client.ensureThread(this.registry, { replies: "off", metadata: { source: "langgraph-registry" } });
    await this.client.setStateKey(this.registry, registryKey(threadId), threadId);
    this.ensured.add(threadId);
  }

  /** The thread's index entries and writes (undefined when the thread does not exist). */
  private async index(threadId: string): Promise<{ cps: CpEntry[]; writes: WEntry[] } | undefined> {
    let kv: Record<string, unknown>;
    try {
      kv = (await this.client.getState(threadId)).kv;
    } catch (err) {
      if (err instanceof ConvlogError && err.status === 404) return undefined;
      throw err;
    }
    const cps: CpEntry[] = [];
    const writes: WEntry[] = [];
    for (const [k, v] of Object.entries(kv)) {
      if (k.startsWith("cp:")) cps.push(v as CpEntry);
      else if (k.startsWith("w:")) writes.push(v as WEntry);
    }
    cps.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    return { cps, writes };
  }

  private async orderedWrites(threadId: string, writes: WEntry[], ns: string, cp: string): Promise<WEntry[]> {
    const mine = writes.filter((w) => w.ns === ns && w.cp === cp);
    mine.sort((a, b) => compareWritesSortKeys(writesSortKey(a.path, a.task, a.idx), writesSortKey(b.path, b.task, b.idx)));
    return mine;
  }

  private async writeValue(threadId: string, w: WEntry): Promise<unknown> {
    const bytes = w.blob !== undefined ? await this.client.getBlob(threadId, w.blob) : unb64(w.value ?? "");
    if (bytes === undefined) throw new Error(`@convlog/langgraph: blob ${w.blob} of thread ${threadId} is missing`);
    return this.serde.loadsTyped(w.type, bytes);
  }

  private async tuple(threadId: string, idx: { cps: CpEntry[]; writes: WEntry[] }, e: CpEntry, config?: RunnableConfig): Promise<CheckpointTuple> {
    const blob = await this.client.getBlob(threadId, `cp/${hash([e.ns, e.id])}`);
    if (blob === undefined) throw new Error(`@convlog/langgraph: checkpoint ${e.id} of thread ${threadId} has an index entry but no blob`);
    const { type, data } = JSON.parse(new TextDecoder().decode(blob)) as { type: string; data: string };
    const checkpoint = (await this.serde.loadsTyped(type, unb64(data))) as Checkpoint;
    // Channel values are stored once per (channel, version): the values of
    // the versions this checkpoint names that some put stored.
    const values: Record<string, unknown> = {};
    await Promise.all(
      Object.entries(checkpoint.channel_versions ?? {}).map(async ([ch, ver]) => {
        const b = await this.client.getBlob(threadId, `ch/${hash([e.ns, ch, ver])}`);
        if (b === undefined) return;
        const v = JSON.parse(new TextDecoder().decode(b)) as { type: string; data: string };
        values[ch] = await this.serde.loadsTyped(v.type, unb64(v.data));
      }),
    );
    (checkpoint as { channel_values: Record<string, unknown> }).channel_values = values;
    if (checkpoint.v < 4 && e.parent !== null) await this.migratePendingSends(threadId, idx, checkpoint, e.ns, e.parent);
    const ws = await this.orderedWrites(threadId, idx.writes, e.ns, e.id);
    const pendingWrites = await Promise.all(ws.map(async (w) => [w.task, w.channel, await this.writeValue(threadId, w)] as [string, string, unknown]));
    const t: CheckpointTuple = {
      config: config ?? { configurable: { thread_id: threadId, checkpoint_ns: e.ns, checkpoint_id: e.id } },
      checkpoint,
      metadata: (await this.serde.loadsTyped(e.metadata[0], unb64(e.metadata[1]))) as CheckpointMetadata,
      pendingWrites,
    };
    if (e.parent !== null) t.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: e.ns, checkpoint_id: e.parent } };
    return t;
  }

  private async migratePendingSends(threadId: string, idx: { writes: WEntry[] }, cp: Checkpoint, ns: string, parent: string): Promise<void> {
    const ws = (await this.orderedWrites(threadId, idx.writes, ns, parent)).filter((w) => w.channel === TASKS);
    const sends = await Promise.all(ws.map((w) => this.writeValue(threadId, w)));
    const m = cp as { channel_values: Record<string, unknown>; channel_versions: ChannelVersions };
    m.channel_values ??= {};
    m.channel_values[TASKS] = sends;
    m.channel_versions ??= {};
    m.channel_versions[TASKS] = Object.keys(m.channel_versions).length > 0 ? maxChannelVersion(...Object.values(m.channel_versions)) : this.getNextVersion(undefined);
  }

  /** The checkpoint of `config` (its `checkpoint_id`, else the newest of its namespace); undefined when there is none. */
  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id as string | undefined;
    if (threadId === undefined) return undefined;
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    const id = getCheckpointId(config);
    const idx = await this.index(threadId);
    if (!idx) return undefined;
    const e = id ? idx.cps.find((c) => c.ns === ns && c.id === id) : idx.cps.find((c) => c.ns === ns);
    if (!e) return undefined;
    return this.tuple(threadId, idx, e, id ? config : undefined);
  }

  /** The checkpoints matching `config` and `options`, newest first per thread and namespace. */
  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    let { limit } = options ?? {};
    const { before, filter } = options ?? {};
    const threadId = config.configurable?.thread_id as string | undefined;
    const ns = config.configurable?.checkpoint_ns as string | undefined;
    const id = config.configurable?.checkpoint_id as string | undefined;
    const threads = threadId !== undefined ? [threadId] : await this.threadIds();
    for (const t of threads) {
      const idx = await this.index(t);
      if (!idx) continue;
      for (const e of idx.cps) {
        if (ns !== undefined && e.ns !== ns) continue;
        if (id && e.id !== id) continue;
        const beforeId = before?.configurable?.checkpoint_id as string | undefined;
        if (beforeId && e.id >= beforeId) continue;
        const metadata = (await this.serde.loadsTyped(e.metadata[0], unb64(e.metadata[1]))) as Record<string, unknown>;
        if (filter && !Object.entries(filter).every(([k, v]) => metadata[k] === v)) continue;
        if (limit !== undefined) {
          if (limit <= 0) return;
          limit -= 1;
        }
        yield await this.tuple(t, idx, e);
      }
    }
  }

  /** Stores a checkpoint (blob + index entry, one state.set event) and returns its config. */
  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const threadId = config.configurable?.thread_id as string | undefined;
    if (threadId === undefined) throw new Error('@convlog/langgraph: put needs configurable.thread_id (graph.invoke(input, { configurable: { thread_id: "..." } }))');
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    await this.ensure(threadId);
    // Only the channels updated by this step (newVersions) are stored, once
    // per (channel, version); the checkpoint blob holds the rest.
    const cp = copyCheckpoint(checkpoint) as Checkpoint & { channel_values: Record<string, unknown> };
    const channelValues = cp.channel_values ?? {};
    cp.channel_values = {};
    await Promise.all(
      Object.entries(newVersions ?? {}).map(async ([ch, ver]) => {
        if (!(ch in channelValues)) return;
        const [t, d] = await this.serde.dumpsTyped(channelValues[ch]);
        await this.client.putBlob(threadId, `ch/${hash([ns, ch, ver])}`, JSON.stringify({ type: t, data: b64(d) }), "application/json");
      }),
    );
    const [[ctype, cdata], [mtype, mdata]] = await Promise.all([this.serde.dumpsTyped(cp), this.serde.dumpsTyped(metadata)]);
    const h = hash([ns, checkpoint.id]);
    await this.client.putBlob(threadId, `cp/${h}`, JSON.stringify({ type: ctype, data: b64(cdata) }), "application/json");
    const entry: CpEntry = { ns, id: checkpoint.id, parent: (config.configurable?.checkpoint_id as string | undefined) ?? null, metadata: [mtype, b64(mdata)] };
    await this.client.setStateKey(threadId, `cp:${h}`, entry);
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  /** Stores a task's pending writes of a checkpoint in one atomic append; a write of a non-negative index already stored is kept as it is. */
  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const threadId = config.configurable?.thread_id as string | undefined;
    const cp = config.configurable?.checkpoint_id as string | undefined;
    if (threadId === undefined) throw new Error("@convlog/langgraph: putWrites needs configurable.thread_id");
    if (cp === undefined) throw new Error("@convlog/langgraph: putWrites needs configurable.checkpoint_id");
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    await this.ensure(threadId);
    const existing = new Set(Object.keys((await this.client.getState(threadId, "w:")).kv));
    const evs: Event[] = [];
    for (const [i, [channel, value]] of writes.entries()) {
      const idx = WRITES_IDX_MAP[channel] ?? i;
      const h = hash([ns, cp, taskId, idx]);
      if (idx >= 0 && existing.has(`w:${h}`)) continue;
      const [type, bytes] = await this.serde.dumpsTyped(value);
      const w: WEntry = { ns, cp, task: taskId, idx, channel, path: taskPath ?? "", type };
      if (bytes.length > INLINE_WRITE_BYTES) {
        w.blob = `w/${h}`;
        await this.client.putBlob(threadId, w.blob, bytes);
      } else w.value = b64(bytes);
      evs.push({ type: "state.set", payload: { key: `w:${h}`, value: w } } as Event);
    }
    if (evs.length > 0) await this.client.append(threadId, evs);
  }

  /** The thread ids this saver's registry holds (threads that got a checkpoint and were not deleted). */
  async threadIds(): Promise<string[]> {
    try {
      return Object.values((await this.client.getState(this.registry)).kv) as string[];
    } catch (err) {
      if (err instanceof ConvlogError && err.status === 404) return [];
      throw err;
    }
  }

  /** Deletes every checkpoint and write of the thread (a soft delete of its convlog thread: the id is free, the log keeps them). */
  async deleteThread(threadId: string): Promise<void> {
    try {
      await this.client.deleteThread(threadId);
    } catch (err) {
      if (!(err instanceof ConvlogError && err.status === 404)) throw err;
    }
    this.ensured.delete(threadId);
    try {
      await this.client.deleteStateKey(this.registry, registryKey(threadId));
    } catch (err) {
      if (!(err instanceof ConvlogError && err.status === 404)) throw err;
    }
  }
}

function registryKey(threadId: string): string {
  return `t:${createHash("sha256").update(threadId).digest("hex")}`;
}
