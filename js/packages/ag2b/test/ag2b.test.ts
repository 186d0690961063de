// @convlog/ag2b against a real agentd, with a stand-in for AG2B's Agent
// (mini-ag2b.ts, the surface of @ag2b/core 0.1.0): the plugin is a function
// for agent.use, messages are appended from the onMessage hook in loop
// order, a fresh agent restores the thread (tool-call arguments back to
// objects), reset and restore become events, chatStream is saved once, the
// cleanup detaches, and with convlog's chat endpoint as the model one copy
// of the conversation is kept.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { ConvlogClient } from "@convlog/client";
import { startAgentd, keys, type Agentd } from "@convlog/testing";
import { convlogPlugin, chatThreadId, type ChatMessage } from "../src/index.js";
import { History, MiniAgent } from "./mini-ag2b.js";

let agentd: Agentd;
before(async () => {
  agentd = await startAgentd();
});
after(async () => {
  await agentd?.stop();
});

type Msg = { role: string; content?: unknown; tool_calls?: { arguments: string }[]; tool_call_id?: string; reasoning?: string; metadata?: unknown };
const tools = { lookup: async (a: Record<string, unknown>) => ({ answer: 42, q: a.q }) };

test("AG2B plugin: use(fn), append, restore in a fresh agent, reset and restore as events, chatStream once", async () => {
  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
  const threadId = "ag2b session #1";
  const a1 = new MiniAgent({ tools });
  assert.equal(typeof convlogPlugin({ client, threadId }), "function", "AG2B's use takes a function");
  const cleanup1 = await a1.use(convlogPlugin({ client, threadId, thread: { agent: "ag2b" } }));
  assert.equal(typeof cleanup1, "function", "the plugin returns a cleanup");
  assert.deepEqual(await a1.chat("hello"), { content: "You said: hello", reasoning: undefined, finishReason: "stop" });
  assert.match((await a1.chat("use lookup")).content ?? "", /42/);

  const th = await client.getThread(threadId, { consistent: true });
  const msgs = th.messages as unknown as Msg[];
  assert.deepEqual(msgs.map((m) => m.role), ["user", "assistant", "user", "assistant", "tool", "assistant"]);
  assert.equal(msgs[3].tool_calls![0].arguments, JSON.stringify({ q: "x", n: 1 }), "arguments stored as JSON text");
  assert.equal(msgs[4].tool_call_id, "call_3");
  assert.equal(msgs[3].reasoning, "the user asked for a tool");
  assert.deepEqual(msgs[1].metadata, { provider: "mini" });

  // A fresh agent (a new process would do the same) restores the thread.
  const a2 = new MiniAgent({ tools });
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
  assert.equal((await a2.chat("again")).content, "You said: again");
  assert.equal((await client.getThread(threadId, { consistent: true })).messages?.length, 4);

  // chatStream goes through the same hook: saved once.
  const events: string[] = [];
  for await (const ev of a2.chatStream("streamed")) events.push(ev.type);
  assert.equal(events.at(-1), "agent_chat_done");
  const after = (await client.getThread(threadId, { consistent: true })).messages as unknown as Msg[];
  assert.deepEqual(after.slice(4).map((m) => [m.role, m.content]), [["user", "streamed"], ["assistant", "You said: streamed"]]);
});

test("AG2B plugin: the cleanup detaches the hook and puts reset/restore back", async () => {
  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
  const threadId = "ag2b cleanup";
  const agent = new MiniAgent({});
  const plugin = convlogPlugin({ client, threadId });
  const cleanup = await agent.use(plugin);
  await agent.chat("one");
  assert.notEqual(agent.history.reset, History.prototype.reset, "reset is wrapped while attached");
  cleanup?.();
  cleanup?.(); // idempotent
  assert.ok(!Object.hasOwn(agent.history, "reset") && !Object.hasOwn(agent.history, "restore"), "reset/restore are the History's own again");
  assert.equal(agent.history.reset, History.prototype.reset);
  await agent.chat("two");
  agent.history.reset();
  await plugin.flush();
  const th = await client.getThread(threadId, { consistent: true, events: true });
  assert.deepEqual((th.messages as unknown as Msg[]).map((m) => m.content), ["one", "You said: one"], "nothing appended after the cleanup");
  assert.ok(!((th.events ?? []) as { type: string }[]).some((e) => e.type === "thread.reset"));
});

test("AG2B plugin with convlog's chat endpoint as the model: one copy (appendMessages: false, chatThreadId)", async () => {
  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
  const conversationId = "ag2b-chat-1";
  // The provider AG2B's OpenAiProvider would be: POST to …/v1/chat/completions as given.
  const seen: string[] = [];
  const provider = async ({ messages }: { messages: ChatMessage[] }) => {
    const r = await fetch(`${agentd.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${keys.acme}`, "X-Conversation-Id": conversationId },
      body: JSON.stringify({ model: "demo", stream: false, messages: messages.map((m) => ({ role: m.role, content: m.role === "assistant" ? m.content ?? "" : m.content })) }),
    });
    assert.equal(r.status, 200, await r.clone().text());
    seen.push(r.headers.get("X-Convlog-Thread") ?? "");
    const body = (await r.json()) as { choices: { message: { content: string }; finish_reason: "stop" }[] };
    return { content: body.choices[0].message.content, finishReason: body.choices[0].finish_reason };
  };
  const threadId = await chatThreadId({ model: "demo", conversationId });
  const a1 = new MiniAgent({ provider });
  const plugin = convlogPlugin({ client, threadId, appendMessages: false });
  await a1.use(plugin);
  await a1.chat("What is 6*7?");
  await a1.chat("And 2+2?");
  assert.deepEqual(seen, [threadId, threadId], "chatThreadId is the chat endpoint's thread");
  const th = await client.getThread(threadId, { consistent: true });
  // The demo agent runs tools of its own: the thread also holds those steps
  // (AG2B sees only the final answers); each user message and answer is there once.
  const turns = (ms: readonly (Msg | ChatMessage)[]) =>
    ms.filter((m) => m.role === "user" || (m.role === "assistant" && !("tool_calls" in m && m.tool_calls?.length) && !("calls" in m && m.calls?.length))).map((m) => [m.role, m.content]);
  assert.equal(turns(th.messages as unknown as Msg[]).filter(([r]) => r === "user").length, 2, "each user message stored once");
  assert.deepEqual(turns(th.messages as unknown as Msg[]), turns(a1.history.getSnapshot()), "one copy: the thread holds the history's turns once");

  // A fresh agent restores the chat endpoint's thread; reset is recorded there.
  const a2 = new MiniAgent({ provider });
  const p2 = convlogPlugin({ client, threadId, appendMessages: false });
  await a2.use(p2);
  assert.deepEqual(turns(a2.history.getSnapshot()), turns(a1.history.getSnapshot()));
  a2.history.reset();
  await p2.flush();
  assert.equal((await client.getThread(threadId, { consistent: true })).messages?.length, 0);
  await a2.chat("hello again");
  assert.deepEqual(turns((await client.getThread(threadId, { consistent: true })).messages as unknown as Msg[]), turns(a2.history.getSnapshot()));
});
