// Group commit in the saver's per-thread queue, against a real agentd: the
// appends that queue behind one in flight go as one atomic append, a
// refused group is sent again member by member (each caller gets its own
// answer), and a group whose answer was lost is sent again whole and
// stored once (convlog keeps an event id once).
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Annotation, END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { JsonPlusSerializer, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { ConvlogClient, ConvlogError, nodeFetch } from "@convlog/client";
import { startAgentd, keys, type Agentd } from "@convlog/testing";
import { ConvlogSaver } from "../src/index.js";

let agentd: Agentd;
let plain: ConvlogClient;

beforeAll(async () => {
  agentd = await startAgentd();
  plain = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
});
afterAll(async () => {
  await agentd?.stop();
});

/** Whether a request is an append (`POST /v1/threads/{id}/events`). */
function isAppend(input: RequestInfo | URL, init?: RequestInit): boolean {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  return (init?.method ?? "GET") === "POST" && /\/v1\/threads\/[^/]+\/events$/.test(new URL(url).pathname);
}

/**
 * A client whose fetch counts the appends it sends and, while `hold` is
 * set, keeps each append waiting on it before sending (so the appends
 * behind it queue up in the saver).
 */
function spyClient() {
  const spy = {
    appends: 0,
    bodies: [] as string[],
    hold: undefined as Promise<void> | undefined,
    /** Called after an append reached agentd and before its answer is returned; may throw to lose the answer. */
    after: undefined as ((res: Response) => void) | undefined,
  };
  const fetch: typeof globalThis.fetch = async (input, init) => {
    if (!isAppend(input, init)) return nodeFetch(input, init);
    spy.appends++;
    spy.bodies.push(String(init?.body));
    if (spy.hold) await spy.hold;
    const res = await nodeFetch(input, init);
    spy.after?.(res);
    return res;
  };
  return { spy, client: new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme, fetch }) };
}

/** A gate: `wait` settles when `open` is called. */
function gate() {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

/** Polls until f returns true (a condition, not a sleep). */
async function until(f: () => boolean): Promise<void> {
  while (!f()) await new Promise((r) => setImmediate(r));
}

/** The ids of the thread's events of `type`, in log order. */
async function eventIds(threadId: string, type: string): Promise<string[]> {
  const ids: string[] = [];
  for (let after = 0; ; ) {
    const res = await nodeFetch(`${agentd.url}/v1/threads/${encodeURIComponent(threadId)}/events?after=${after}&limit=1000`, {
      headers: { Accept: "application/json", Authorization: `Bearer ${keys.acme}` },
    });
    expect(res.status).toBe(200);
    const page = (await res.json()) as { events: { type: string; id: string }[]; next_after: number; more: boolean };
    for (const e of page.events) if (e.type === type) ids.push(e.id);
    if (!page.more) return ids;
    after = page.next_after;
  }
}

/** A UUIDv7 (RFC 9562) of now: convlog's event ids. */
function uuidv7(): string {
  const b = randomBytes(16);
  b.writeUIntBE(Date.now(), 0, 6);
  b[6] = (b[6] & 0x0f) | 0x70;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** A graph whose one node appends a short AI message and counts, for `steps` steps. */
function counter(saver: ConvlogSaver, steps: number) {
  const State = Annotation.Root({ ...MessagesAnnotation.spec, n: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }) });
  return new StateGraph(State)
    .addNode("step", (s) => ({ n: 1, messages: [new AIMessage(`step ${s.n + 1}`)] }))
    .addEdge(START, "step")
    .addConditionalEdges("step", (s) => (s.n < steps ? "step" : END))
    .compile({ checkpointer: saver });
}

/** A config naming a checkpoint of the thread. */
const at = (thread_id: string, checkpoint_id = "cp-1") => ({ configurable: { thread_id, checkpoint_ns: "", checkpoint_id } });

/**
 * A saver on a spying client with one putWrites of a new thread in flight
 * and held (the thread created by an earlier one): the appends made until
 * `g.open()` queue behind it. The spy's counts start at that append.
 */
async function oneInFlight(name: string) {
  const { spy, client } = spyClient();
  const saver = new ConvlogSaver({ client });
  const thread_id = `lg-group-${name}-${Date.now()}`;
  await saver.putWrites(at(thread_id), [["a", 0]], "task-0");
  spy.appends = 0;
  spy.bodies = [];
  const g = gate();
  spy.hold = g.wait;
  const first = saver.putWrites(at(thread_id), [["a", 1]], "task-1");
  await until(() => spy.appends === 1);
  spy.hold = undefined;
  return { spy, saver, thread_id, g, first };
}

describe("group commit of a thread's appends", () => {
  it("sends fewer appends than the saver's calls when a graph does not await its writes (durability async)", async () => {
    const { spy, client } = spyClient();
    const saver = new ConvlogSaver({ client });
    const calls = { put: 0, putWrites: 0 };
    for (const op of ["put", "putWrites"] as const) {
      const f = saver[op].bind(saver) as (...a: unknown[]) => Promise<unknown>;
      (saver as unknown as Record<string, unknown>)[op] = (...a: unknown[]) => {
        calls[op]++;
        return f(...a);
      };
    }
    const steps = 40;
    const graph = counter(saver, steps);
    const thread_id = `lg-group-async-${Date.now()}`;
    const out = await graph.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id }, durability: "async", recursionLimit: steps + 10 });
    expect(out.n).toBe(steps);

    expect(spy.appends).toBeGreaterThan(0);
    expect(spy.appends).toBeLessThan(calls.put + calls.putWrites);
    // Every call's events landed, once each.
    const saved = await eventIds(thread_id, "checkpoint.saved");
    expect(saved).toHaveLength(calls.put);
    expect(new Set(saved).size).toBe(saved.length);
    const writes = await eventIds(thread_id, "checkpoint.writes");
    expect(writes).toHaveLength(calls.putWrites);
    expect(new Set(writes).size).toBe(writes.length);
    // The graph's state reads back whole, from a fresh saver.
    const state = await counter(new ConvlogSaver({ client: plain }), steps).getState({ configurable: { thread_id } });
    expect(state.values.n).toBe(steps);
    expect(state.values.messages).toHaveLength(steps + 1);
    const th = await plain.getThread(thread_id, { consistent: true });
    expect(th.message_count).toBe(steps + 1);
  });

  it("sends the appends queued behind one in flight as one append, in call order", async () => {
    const { spy, saver, thread_id, g, first } = await oneInFlight("order");
    const rest = [2, 3, 4].map((i) => saver.putWrites(at(thread_id), [["a", i]], `task-${i}`));
    g.open();
    await Promise.all([first, ...rest]);

    expect(spy.appends).toBe(2);
    const page = await plain.checkpoints(thread_id, {});
    expect(page.checkpoints).toHaveLength(0); // writes of a checkpoint that was never put
    const ids = await eventIds(thread_id, "checkpoint.writes");
    expect(ids).toHaveLength(5);
    const tasks = spy.bodies.flatMap((b) => [...b.matchAll(/"task":"(task-\d)"/g)].map((m) => m[1]));
    expect(tasks).toEqual(["task-1", "task-2", "task-3", "task-4"]);
  });

  it("answers each member of a refused group on its own: the failing one gets its error, the others land", async () => {
    const { spy, saver, thread_id, g, first } = await oneInFlight("refused");
    // A task id longer than checkpoint.writes.json allows (256): refused.
    const settled = Promise.allSettled([
      saver.putWrites(at(thread_id), [["a", 2]], "task-2"),
      saver.putWrites(at(thread_id), [["a", 3]], "x".repeat(300)),
      saver.putWrites(at(thread_id), [["a", 4]], "task-4"),
    ]);
    g.open();
    await first;
    const [ok2, bad, ok4] = await settled;

    expect(ok2.status).toBe("fulfilled");
    expect(ok4.status).toBe("fulfilled");
    expect(bad.status).toBe("rejected");
    const err = (bad as PromiseRejectedResult).reason;
    expect(err).toBeInstanceOf(ConvlogError);
    expect((err as ConvlogError).status).toBe(422);
    // The first alone, the group of three (refused), then each of the three.
    expect(spy.appends).toBe(5);
    const tasks = spy.bodies.slice(2).map((b) => [...b.matchAll(/"task":"([^"]+)"/g)].map((m) => m[1].slice(0, 6)));
    expect(tasks).toEqual([["task-2"], ["xxxxxx"], ["task-4"]]);
    expect(await eventIds(thread_id, "checkpoint.writes")).toHaveLength(4);
  });

  it("sends a group whose answer was lost again whole, and convlog stores its events once", async () => {
    const { spy, saver, thread_id, g, first } = await oneInFlight("lost");
    const rest = [2, 3, 4].map((i) => saver.putWrites(at(thread_id), [["a", i]], `task-${i}`));
    // The group reaches agentd and is stored, but its answer is lost.
    spy.after = (res) => {
      if (spy.appends === 2) {
        expect(res.ok).toBe(true);
        throw new Error("connection reset after the request was sent");
      }
    };
    g.open();
    await Promise.all([first, ...rest]);

    // The first, the group (answer lost), the group again (a duplicate, answered with what was stored).
    expect(spy.appends).toBe(3);
    expect(spy.bodies[2]).toBe(spy.bodies[1]);
    const ids = await eventIds(thread_id, "checkpoint.writes");
    expect(ids).toHaveLength(5);
    expect(new Set(ids).size).toBe(5);
  });

  it("keeps an event id once when the same append is sent twice (convlog deduplicates by event id)", async () => {
    const thread_id = `lg-dedup-${Date.now()}`;
    await plain.ensureThread(thread_id, { replies: "off" });
    const ev = (id: string, task: string) => ({ type: "checkpoint.writes", id, payload: { checkpoint: "cp-1", task, writes: [] } });
    const ids = [uuidv7(), uuidv7()];
    const body = JSON.stringify({ events: [ev(ids[0], "t1"), ev(ids[1], "t2")] });
    const a = await plain.appendJSON(thread_id, body);
    const b = await plain.appendJSON(thread_id, body);
    expect(a.duplicate).toBe(false);
    expect(b.duplicate).toBe(true);
    expect(b.events).toEqual(a.events);
    expect(await eventIds(thread_id, "checkpoint.writes")).toEqual(ids);
  });
});

describe("a list value serialized message by message", () => {
  it("stores a message changed in place between puts as it is at the later put", async () => {
    const saver = new ConvlogSaver({ client: plain });
    const serde = new JsonPlusSerializer();
    const thread_id = `lg-mutated-${Date.now()}`;
    const m1 = new AIMessage({ content: "first", id: "m1" });
    const cp = (messages: unknown[], v: number) => ({ ...emptyCheckpoint(), id: uuid6(v), channel_values: { messages }, channel_versions: { messages: v } });
    const meta = (step: number) => ({ source: "loop" as const, step, parents: {} });
    const c1 = await saver.put({ configurable: { thread_id, checkpoint_ns: "" } }, cp([m1], 1), meta(0), { messages: 1 });
    m1.content = "changed";
    m1.response_metadata.note = "nested";
    const m2 = new AIMessage({ content: "second", id: "m2" });
    const c2 = await saver.put(c1, cp([m1, m2], 2), meta(1), { messages: 2 });

    const want = async (list: unknown[]) => JSON.stringify(await serde.loadsTyped("json", (await serde.dumpsTyped(list))[1]));
    const got = await saver.getTuple(c2);
    expect(JSON.stringify(got?.checkpoint.channel_values.messages)).toBe(await want([m1, m2]));
    expect(JSON.stringify(got?.checkpoint.channel_values.messages)).toContain("nested");
    // The first checkpoint keeps the message as it was put.
    const first = await saver.getTuple(c1);
    expect(JSON.stringify(first?.checkpoint.channel_values.messages)).toBe(await want([new AIMessage({ content: "first", id: "m1" })]));
  });
});

describe("a list value written element by element", () => {
  it("reads back as the serializer's own text of the whole list would", async () => {
    const saver = new ConvlogSaver({ client: plain });
    const serde = new JsonPlusSerializer();
    const thread_id = `lg-elements-${Date.now()}`;
    const shared = new HumanMessage({ content: "said twice", id: "h1" });
    const lists: unknown[][] = [
      [],
      [shared, new AIMessage({ content: "", id: "a1", tool_calls: [{ id: "call_1", name: "lookup", args: { q: "x", n: [1, 2] } }] }),
        new ToolMessage({ content: JSON.stringify({ ok: true }), tool_call_id: "call_1", id: "t1" }), shared],
      ["text", 42, null, true, { plain: { nested: ["a", 1.5] } }, [1, [2, [3]]], "\u0000 \u2028 quotes \" and \\"],
      [new Date(0), new Map([["k", 1]]), new Set([1, 2]), undefined, () => 1],
    ];
    let config = { configurable: { thread_id, checkpoint_ns: "" } } as Parameters<ConvlogSaver["put"]>[0];
    for (let i = 0; i < lists.length; i++) {
      const cp = { ...emptyCheckpoint(), id: uuid6(i), channel_values: { items: lists[i] }, channel_versions: { items: i + 1 } };
      config = await saver.put(config, cp, { source: "loop" as const, step: i, parents: {} }, { items: i + 1 });
      const [type, bytes] = await serde.dumpsTyped(lists[i]);
      const want = await serde.loadsTyped(type, bytes);
      const got = await saver.getTuple(config);
      expect(got?.checkpoint.channel_values.items, `list ${i}`).toEqual(want);
    }
  });
});
