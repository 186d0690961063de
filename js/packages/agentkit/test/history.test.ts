// AgentKit as its users configure it: convlogHistory({ client }) as
// the history and AgentKit's own openai() model pointed at convlog's
// /v1/chat/completions with a stable conversation id
// (defaultParameters.metadata.conversation_id). A recording proxy in front
// of agentd keeps every request the model endpoint receives.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { AgentResult, createAgent, createNetwork, createState, createTool, openai } from "@inngest/agent-kit";
import { z } from "zod";
import { ConvlogClient } from "@convlog/client";
import { startAgentd, keys, type Agentd } from "@convlog/testing";
import { recordingProxy, repeated, type Proxy } from "./proxy.js";
import { convlogHistory, resultsOf } from "../src/index.js";

type S = Record<string, unknown>;
type Msg = { role: string; content?: unknown; tool_call_id?: string };

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

function network(client: ConvlogClient, conversationId: string) {
  const lookup = createTool({ name: "lookup", description: "Looks the answer up.", parameters: z.object({}), handler: async () => ({ answer: 42 }) });
  const agent = createAgent<S>({
    name: "helper",
    system: "You are a helpful assistant.",
    tools: [lookup],
    model: openai({ model: "demo", apiKey: keys.acme, baseUrl: `${proxy.url}/v1/`, defaultParameters: { metadata: { conversation_id: conversationId } } as never }),
  });
  return createNetwork<S>({
    name: "issue-39",
    agents: [agent],
    router: ({ callCount, lastResult }) => (callCount === 0 || (lastResult?.toolCalls.length ?? 0) > 0 ? agent : undefined),
    maxIter: 4,
    history: convlogHistory<S>({ client }),
  });
}

test("the model request holds each message once, turn after turn, on one chat thread", async () => {
  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
  const threadId = "issue-39/history";
  const inputs: string[] = [];
  const from = proxy.requests.length;
  for (let turn = 1; turn <= 6; turn++) {
    const input = turn === 1 ? "turn 1; use lookup" : `turn ${turn}: hello`;
    inputs.push(input);
    await network(client, threadId).run(input, { state: createState<S>({}, { threadId }) });
  }
  const reqs = proxy.requests.slice(from);
  assert.ok(reqs.length >= 7, `${reqs.length} model requests`);
  for (const [i, r] of reqs.entries()) {
    assert.equal(r.status, 200, `request ${i} answered (not 409 history-diverged)`);
    assert.deepEqual(repeated(r.body.messages), [], `request ${i} holds each message once`);
    const users = r.body.messages.filter((m) => m.role === "user").map((m) => m.content as string);
    assert.deepEqual([...users].sort(), inputs.slice(0, users.length).sort(), `request ${i}: the user messages so far, once each`);
  }
  const threads = new Set(reqs.map((r) => r.thread));
  assert.equal(threads.size, 1, `one chat thread for the conversation id, not one per turn (${[...threads].join(", ")})`);

  // The history thread: each user message once, the tool result as the tool returned it.
  const th = await client.getThread(threadId, { consistent: true });
  const msgs = th.messages as unknown as Msg[];
  assert.deepEqual(msgs.filter((m) => m.role === "user").map((m) => m.content), inputs);
  const tool = msgs.find((m) => m.role === "tool");
  assert.equal(tool?.content, JSON.stringify({ data: { answer: 42 } }));
});

test("tool results are stored as returned: a string as it is, an object as its JSON, once", async () => {
  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
  const history = convlogHistory<S>({ client });
  const threadId = "issue-39-tool-content";
  await history.createThread!({ state: createState<S>({}, { threadId }), input: "" } as never);
  const call = (id: string) => ({ type: "tool" as const, id, name: "profile", input: {} });
  const r = new AgentResult("helper", [
    { type: "tool_call", role: "assistant", stop_reason: "tool", tools: [call("c1"), call("c2")] },
  ], [
    { type: "tool_result", role: "tool_result", tool: call("c1"), content: '{"name":"colt"}', stop_reason: "tool" },
    { type: "tool_result", role: "tool_result", tool: call("c2"), content: { name: "colt" }, stop_reason: "tool" },
  ], new Date("2026-01-02T03:04:05.678Z"));
  await history.appendResults!({ threadId, newResults: [r] } as never);
  const th = await client.getThread(threadId, { consistent: true });
  const tools = (th.messages as unknown as Msg[]).filter((m) => m.role === "tool");
  assert.equal(tools[0].content, '{"name":"colt"}', "a string result is stored as it is, not JSON-quoted");
  assert.equal(tools[1].content, '{"name":"colt"}', "an object result is stored as its JSON");
  const [back] = resultsOf(th.messages as never);
  assert.equal(back.checksum, r.checksum, "and reloads exactly");
  assert.deepEqual(back.toolCalls, r.toolCalls);
});

// AgentKit sends [system, the run's user message, ...history, ...this
// run's results]: on a later turn, the history's last answer block and this
// run's tool call read as one answer block. agentd/chat's rule 5 (current
// first) takes the client's tool result for the pending call, so the
// agent answers from it instead of calling the tool again until maxIter.
test("AgentKit's own openai(): a client tool round trip on a later turn", async () => {
  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
  const threadId = "issue-39/later-tool";
  for (const input of ["hello", "use lookup"]) await network(client, threadId).run(input, { state: createState<S>({}, { threadId }) });
  const th = await client.getThread(threadId, { consistent: true });
  const msgs = th.messages as unknown as (Msg & { tool_calls?: unknown[] })[];
  assert.deepEqual(msgs.map((m) => m.role), ["user", "assistant", "user", "assistant", "tool", "assistant"], "one tool call, its result, the answer");
});
