// @convlog/ag2b against a real agentd, with a minimal AG2B agent
// (mini-ag2b.ts): messages appended in loop order, a fresh agent restores
// the thread (tool-call arguments back to objects), reset and restore
// become events.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { ConvlogClient } from "@convlog/client";
import { startAgentd, keys, type Agentd } from "@convlog/testing";
import { convlogPlugin } from "../src/index.js";
import { MiniAgent } from "./mini-ag2b.js";

let agentd: Agentd;
before(async () => {
  agentd = await startAgentd();
});
after(async () => {
  await agentd?.stop();
});

test("AG2B plugin: append, restore in a fresh agent, reset and restore as events", async () => {
  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
  const threadId = "ag2b session #1";
  const tools = { lookup: async (a: Record<string, unknown>) => ({ answer: 42, q: a.q }) };
  const a1 = new MiniAgent(tools);
  await a1.use(convlogPlugin({ client, threadId, thread: { agent: "ag2b" } }));
  assert.equal(await a1.chat("hello"), "You said: hello");
  assert.match(await a1.chat("use lookup"), /42/);

  const th = await client.getThread(threadId, { consistent: true });
  const msgs = th.messages as unknown as { role: string; tool_calls?: { arguments: string }[]; tool_call_id?: string; reasoning?: string; metadata?: unknown }[];
  assert.deepEqual(msgs.map((m) => m.role), ["user", "assistant", "user", "assistant", "tool", "assistant"]);
  assert.equal(msgs[3].tool_calls![0].arguments, JSON.stringify({ q: "x", n: 1 }), "arguments stored as JSON text");
  assert.equal(msgs[4].tool_call_id, "call_3");
  assert.equal(msgs[3].reasoning, "the user asked for a tool");
  assert.deepEqual(msgs[1].metadata, { provider: "mini" });

  // A fresh agent (a new process would do the same) restores the thread.
  const a2 = new MiniAgent(tools);
  const p2 = convlogPlugin({ client, threadId });
  await a2.use(p2);
  assert.deepEqual(a2.history.getSnapshot(), a1.history.getSnapshot(), "the restored history equals the original, arguments as objects");
  const saved = [...a2.history.getSnapshot()];

  // reset and restore are events.
  a2.history.reset();
  await p2.flush();
  assert.equal((await client.getThread(threadId, { consistent: true })).messages?.length, 0);
  a2.history.restore(saved.slice(0, 2));
  await p2.flush();
  const restored = await client.getThread(threadId, { consistent: true, events: true });
  assert.equal(restored.messages?.length, 2);
  const types = ((restored.events ?? []) as { type: string }[]).map((e) => e.type);
  assert.deepEqual(types.slice(-2), ["thread.reset", "thread.restored"]);
  assert.equal(await a2.chat("again"), "You said: again");
  assert.equal((await client.getThread(threadId, { consistent: true })).messages?.length, 4);
});
