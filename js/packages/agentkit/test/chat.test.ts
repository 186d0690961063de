// AgentKit with convlog's own /v1/chat/completions as
// its model and convlogHistory({ client, chat }) as its history: 20 turns
// with a client tool on one thread. A recording proxy in front of agentd
// keeps every request the model endpoint receives: each holds each message
// once, in the conversation's order; the tenant holds one thread.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createAgent, createNetwork, createState, createTool } from "@inngest/agent-kit";
import { z } from "zod";
import { ConvlogClient } from "@convlog/client";
import { startAgentd, keys, type Agentd } from "@convlog/testing";
import { recordingProxy, repeated, type Proxy } from "./proxy.js";
import { convlogHistory, chatThreadId, type ConvlogHistory } from "../src/index.js";

type S = Record<string, unknown>;
type Msg = { role: string; content?: unknown; tool_calls?: { id: string }[]; tool_call_id?: string; agent?: string };

let agentd: Agentd;
let proxy: Proxy;
before(async () => {
  agentd = await startAgentd();
  proxy = await recordingProxy(agentd.url);
});
after(async () => {
  await proxy?.close();
  await agentd?.stop();
});

// AgentKit runs a network once: one per turn, all on the same history.
function network(history: ConvlogHistory<S>, threadId: string, turn: number) {
  const lookup = createTool({ name: "lookup", description: "Looks the answer up.", parameters: z.object({}), handler: async () => ({ answer: 42, turn }) });
  const agent = createAgent<S>({ name: "helper", system: "You are a helpful assistant.", tools: [lookup], model: history.model(threadId) });
  return createNetwork<S>({
    name: "issue-39-chat",
    agents: [agent],
    router: ({ callCount, lastResult }) => (callCount === 0 || (lastResult?.toolCalls.length ?? 0) > 0 ? agent : undefined),
    maxIter: 4,
    history,
  });
}

test("AgentKit: 20 turns with a client tool on one thread, each message once in every model request", async () => {
  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.globex });
  const history = convlogHistory<S>({ client, chat: { baseUrl: proxy.url, apiKey: keys.globex, agent: "demo" } });
  const threadId = "support/ticket 20 · ü";
  const inputs: string[] = [];
  for (let turn = 1; turn <= 20; turn++) {
    const input = turn % 2 === 1 ? `turn ${turn}; use lookup` : `turn ${turn}: hello`;
    inputs.push(input);
    const run = await network(history, threadId, turn).run(input, { state: createState<S>({}, { threadId }) });
    const mine = run.state.results.slice(-(turn % 2 === 1 ? 2 : 1));
    if (turn % 2 === 1) {
      assert.equal(mine[0].toolCalls.length, 1, `turn ${turn}: AgentKit ran the client tool`);
      assert.deepEqual(mine[0].toolCalls[0].content, { data: { answer: 42, turn } });
      assert.match(JSON.stringify(mine[1].output), /42/, `turn ${turn}: the answer is from the tool's result`);
    } else {
      assert.match(JSON.stringify(mine[0].output), new RegExp(`turn ${turn}: hello`), `turn ${turn}: answered by convlog's chat endpoint`);
    }
  }

  const thread = chatThreadId("demo", "", threadId);
  const reqs = proxy.requests;
  assert.equal(reqs.length, 30, "one request per echo turn, two per tool turn");
  for (const [i, r] of reqs.entries()) {
    assert.equal(r.status, 200, `request ${i} answered`);
    assert.equal(r.thread, thread, `request ${i} is on the history's thread`);
    assert.deepEqual(repeated(r.body.messages), [], `request ${i} holds each message once`);
    const users = r.body.messages.filter((m) => m.role === "user").map((m) => m.content as string);
    assert.deepEqual(users, inputs.slice(0, users.length), `request ${i}: the user messages so far, once each, in order`);
    assert.equal(r.body.messages[0].role, "system");
  }

  // The tenant holds one thread: the history is the model's chat thread.
  const page = await client.listThreads({ limit: 100 });
  assert.deepEqual(page.threads.map((t: { thread?: string }) => t.thread), [thread], "one convlog thread, no extra threads");
  const th = await client.getThread(thread, { consistent: true });
  const msgs = th.messages as unknown as Msg[];
  assert.deepEqual(msgs.filter((m) => m.role === "user").map((m) => m.content), inputs, "each user message once");
  const calls = msgs.flatMap((m) => m.tool_calls ?? []).map((c) => c.id);
  const results = msgs.filter((m) => m.role === "tool");
  assert.equal(calls.length, 10);
  assert.deepEqual(results.map((m) => m.tool_call_id), calls, "each tool call answered once");
  results.forEach((m, i) => assert.equal(m.content, JSON.stringify({ data: { answer: 42, turn: 2 * i + 1 } }), "tool results as the tool returned them"));
  assert.equal((th.pending ?? []).length, 0);
  // The last request is the thread so far, in the thread's order.
  const proj = (ms: { role: string; content?: unknown; tool_call_id?: string }[]) =>
    ms.filter((m) => m.role === "user" || m.role === "tool").map((m) => `${m.role}:${m.role === "tool" ? m.tool_call_id : m.content}`);
  const last = proj(reqs[reqs.length - 1].body.messages);
  assert.deepEqual(last, proj(msgs).slice(0, last.length));
});

test("chat mode: a run that stops after a tool call stores its result, and the next run goes on", async () => {
  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
  const history = convlogHistory<S>({ client, chat: { baseUrl: proxy.url, apiKey: keys.acme, agent: "demo" } });
  const threadId = "issue-39-stop-after-tool";
  const from = proxy.requests.length;
  for (const input of ["use lookup", "hello again"]) {
    const lookup = createTool({ name: "lookup", description: "Looks the answer up.", parameters: z.object({}), handler: async () => ({ answer: 42 }) });
    const agent = createAgent<S>({ name: "helper", system: "You are a helpful assistant.", tools: [lookup], model: history.model(threadId) });
    // One agent call per run: the tool's result reaches no model request.
    const net = createNetwork<S>({ name: "one-call", agents: [agent], router: ({ callCount }) => (callCount === 0 ? agent : undefined), history });
    await net.run(input, { state: createState<S>({}, { threadId }) });
  }
  const reqs = proxy.requests.slice(from);
  assert.deepEqual(reqs.map((r) => r.status), [200, 200]);
  for (const r of reqs) assert.deepEqual(repeated(r.body.messages), []);
  const th = await client.getThread(chatThreadId("demo", "", threadId), { consistent: true });
  const msgs = th.messages as unknown as Msg[];
  assert.deepEqual(msgs.map((m) => m.role), ["user", "assistant", "tool", "assistant", "user", "assistant"],
    "the tool result stored by the history, the agent's answer to it, the next turn");
  assert.equal(msgs[2].content, JSON.stringify({ data: { answer: 42 } }));
  assert.equal((await client.listThreads({})).threads.filter((t: { thread?: string }) => t.thread === th.thread).length, 1);
});

test("chat mode scoped to a user: the user's thread, owned by the user", async () => {
  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
  const history = convlogHistory<S>({ client, chat: { baseUrl: proxy.url, apiKey: keys.acme, agent: "demo", user: "user-7" } });
  const threadId = "issue-39-user";
  const from = proxy.requests.length;
  for (const [turn, input] of ["use lookup", "and now?"].entries()) await network(history, threadId, turn).run(input, { state: createState<S>({}, { threadId }) });
  const thread = chatThreadId("demo", "user-7", threadId);
  assert.deepEqual(proxy.requests.slice(from).map((r) => [r.status, r.thread, r.body.user]), [
    [200, thread, "user-7"], [200, thread, "user-7"], [200, thread, "user-7"],
  ]);
  const th = await client.getThread(thread, { consistent: true });
  assert.equal(th.owner, "user-7");
  assert.deepEqual((th.messages as unknown as Msg[]).filter((m) => m.role === "user").map((m) => m.content), ["use lookup", "and now?"]);
});

test("chat mode needs the run's thread id: the model's conversation id", async () => {
  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
  const history = convlogHistory<S>({ client, chat: { baseUrl: proxy.url, apiKey: keys.acme, agent: "demo" } });
  const agent = createAgent<S>({ name: "helper", system: "You are a helpful assistant.", model: history.model("x") });
  const net = createNetwork<S>({ name: "no-thread", agents: [agent], router: ({ callCount }) => (callCount === 0 ? agent : undefined), history });
  await assert.rejects(net.run("hello"), /chat mode needs the run's state.threadId/);
  assert.throws(() => convlogHistory<S>({ client }).model("x"), /needs the chat option/);
});
