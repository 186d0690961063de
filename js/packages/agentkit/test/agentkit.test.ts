// The real @inngest/agent-kit 0.13 network with @convlog/agentkit as its
// history and convlog's own /v1/chat/completions as its model, against a
// real agentd: two turns on one thread id (the first runs a client tool),
// a fresh process resumes the thread, a simulated step retry stores
// nothing twice, and a reload gives AgentKit the same results (checksums).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { AgentResult, createState } from "@inngest/agent-kit";
import { startAgentd, keys, type Agentd } from "@convlog/testing";
import { makeNetwork } from "./network.js";
import { convlogHistory, resultsOf } from "../src/index.js";

let agentd: Agentd;
before(async () => {
  agentd = await startAgentd();
});
after(async () => {
  await agentd?.stop();
});

const json = (v: unknown) => JSON.parse(JSON.stringify(v)) as unknown;

type Msg = { role: string; content?: unknown; tool_calls?: { id: string; name: string; arguments: string }[]; tool_call_id?: string; is_error?: boolean; event_id?: string };

test("AgentKit 0.13: two turns, a fresh process resumes, a step retry stores nothing twice", async () => {
  // Any string is a thread id (AgentKit allows it; convlog maps it).
  const threadId = "agentkit run/1 · ü";
  const { network, client } = makeNetwork(agentd.url, keys.acme, threadId);

  // Turn 1: the model calls the client tool; AgentKit runs it; the model answers from its result.
  const run1 = await network.run("use lookup", { state: createState<Record<string, unknown>>({}, { threadId }) });
  // results: the tool call, the answer (get leaves out the run's own user message: AgentKit sends it).
  const r1 = run1.state.results.filter((r) => r.agentName === "helper");
  assert.equal(r1.length, 2, "two agent calls (tool call, then answer)");
  assert.equal(r1[0].toolCalls.length, 1, "the first call ran the lookup tool");
  assert.deepEqual(r1[0].toolCalls[0].content, { data: { answer: 42 } });
  assert.match(JSON.stringify(r1[1].output), /answer.*42/, "the model answered from the tool's result");

  // Turn 2: the same thread id, a new network run (history loaded by get).
  const { network: network2 } = makeNetwork(agentd.url, keys.acme, threadId);
  const run2 = await network2.run("my name is colt", { state: createState<Record<string, unknown>>({}, { threadId }) });
  const last2 = run2.state.results[run2.state.results.length - 1];
  assert.match(JSON.stringify(last2.output), /my name is colt/, "turn 2 is answered by convlog's chat endpoint as the model");

  // Turn 3 in a fresh process.
  const script = fileURLToPath(new URL("./resume-run.js", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [script, agentd.url, keys.acme, threadId, "what did I say?"]);
  const resumed = JSON.parse(stdout) as { results: number; output: unknown };
  assert.ok(resumed.results > 4, `the fresh process loaded the earlier turns (${resumed.results} results)`);

  const th = await client.getThread(threadId, { consistent: true });
  assert.match(th.thread, /^ext-[a-z2-7]{32}$/);
  assert.equal(th.external_id, threadId);
  const msgs = th.messages as unknown as Msg[];
  const roles = msgs.map((m) => m.role).join(",");
  assert.equal(roles, "user,assistant,tool,assistant,user,assistant,user,assistant", "every user message, assistant turn and tool result, in order");
  assert.deepEqual(msgs.filter((m) => m.role === "user").map((m) => m.content), ["use lookup", "my name is colt", "what did I say?"]);
  const call = msgs[1].tool_calls![0];
  assert.equal(call.name, "lookup");
  assert.equal(msgs[2].tool_call_id, call.id, "the tool result is paired with its call");
  assert.equal(msgs[2].content, JSON.stringify({ data: { answer: 42 } }));
  assert.equal((th.pending ?? []).length, 0);

  // A simulated step retry: the hooks run again with the same inputs.
  const history = convlogHistory<Record<string, unknown>>({ client });
  const ctx = { state: run2.state, network: network2.run as never, input: "my name is colt", threadId };
  const before = th.version;
  const newResults = run2.state.results.slice(-1);
  await history.appendResults!({ ...ctx, newResults } as never);
  await history.appendResults!({ ...ctx, newResults: r1 } as never);
  const again = await client.getThread(threadId, { consistent: true });
  assert.equal(again.version, before, "a retried appendResults stores nothing");
  assert.equal((again.messages ?? []).length, msgs.length);

  // The user message hook retried with the same message id: stored once.
  const userMessage = { id: "0b6f7c1e-1111-4222-8333-944455556666", content: "retry me", role: "user" as const, timestamp: new Date() };
  await history.appendUserMessage!({ ...ctx, userMessage } as never);
  const v1 = (await client.getThread(threadId, { consistent: true })).version;
  await history.appendUserMessage!({ ...ctx, userMessage } as never);
  const v2 = (await client.getThread(threadId, { consistent: true })).version;
  assert.equal(v2, v1, "a retried appendUserMessage stores nothing");

  // A reload gives AgentKit the same results: same agent, output, tool results and checksum.
  // (A new run: get leaves out only the user message its own run stored.)
  const loaded = await history.get!({ ...ctx, state: createState<Record<string, unknown>>({}, { threadId }) } as never);
  const agentResults = loaded.filter((r) => r.agentName !== "user");
  const original = [...r1, ...run2.state.results.slice(-1)];
  for (const o of original) {
    const l = agentResults.find((r) => r.checksum === o.checksum);
    assert.ok(l, `result ${o.agentName} ${o.checksum} reloads with the same checksum`);
    assert.equal(l.agentName, o.agentName);
    // As JSON, the form AgentKit itself persists (export(), checksum): an
    // input: undefined member of AgentKit's own objects has no JSON form.
    assert.deepEqual(json(l.output), json(o.output));
    assert.deepEqual(json(l.toolCalls), json(o.toolCalls));
  }
  assert.deepEqual(loaded.filter((r) => r.agentName === "user").map((r) => (r.output[0] as { content: string }).content),
    ["use lookup", "my name is colt", "what did I say?", "retry me"], "user messages survive a reload");
});

test("an AgentResult with an error tool result and raw argument text maps exactly", async () => {
  const raw = JSON.stringify({ choices: [{ message: { tool_calls: [{ id: "c1", function: { name: "lookup", arguments: '{ "q" : "x" }' } }] } }] });
  const r = new AgentResult("helper", [
    { type: "text", role: "assistant", content: "let me look", stop_reason: "tool" },
    { type: "tool_call", role: "assistant", stop_reason: "tool", tools: [{ type: "tool", id: "c1", name: "lookup", input: { q: "x" } }] },
  ], [{ type: "tool_result", role: "tool_result", tool: { type: "tool", id: "c1", name: "lookup", input: { q: "x" } }, content: { error: "not found" }, stop_reason: "tool" }],
  new Date("2026-01-02T03:04:05.678Z"), undefined, undefined, raw);
  const client = makeNetwork(agentd.url, keys.acme, "agentkit-exact").client;
  const history = convlogHistory<Record<string, unknown>>({ client });
  const threadId = "agentkit-exact";
  await history.createThread!({ state: createState<Record<string, unknown>>({}, { threadId }), input: "" } as never);
  await history.appendResults!({ threadId, newResults: [r] } as never);
  const th = await client.getThread(threadId, { consistent: true });
  const msgs = th.messages as unknown as Msg[];
  assert.equal(msgs[0].tool_calls![0].arguments, '{ "q" : "x" }', "the model's raw argument text is kept");
  assert.equal(msgs[1].is_error, true);
  const [back] = resultsOf(th.messages as never);
  assert.equal(back.checksum, r.checksum);
  assert.deepEqual(back.output, r.output);
  assert.deepEqual(back.toolCalls, r.toolCalls);
});
