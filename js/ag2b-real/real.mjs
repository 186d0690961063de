// Runs @convlog/ag2b (the workspace's built dist) against the real AG2B
// (@ag2b/core bundled from its source by run.sh) and a real agentd started
// by @convlog/testing. Each check prints "ok ..."; the run ends "ALL OK".
//   AG2B_SRC=/path/to/ag2b ./run.sh   # bundles AG2B, checks the types, runs this
//   node real.mjs child URL THREAD    # the fresh-process restore (spawned by the above)
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { z } from "zod/v4";
import { Agent, History, OpenAiProvider, Scope, Tool } from "./build/ag2b.mjs";
const JS = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, ""); // js/ of this repository
const { convlogPlugin, chatThreadId } = await import(`${JS}/packages/ag2b/dist/src/index.js`);
const { ConvlogClient } = await import(`${JS}/packages/client/dist/src/index.js`);
const KEY = "sk-acme-0123456789";

// A scripted OpenAI-compatible model behind AG2B's own OpenAiProvider (its fetch option).
async function scriptedFetch(_url, init) {
  const body = JSON.parse(init.body);
  const last = body.messages.at(-1);
  let msg, finish = "stop";
  const m = last.role === "user" && /^use (\w+)/.exec(last.content);
  if (m) (msg = { role: "assistant", content: null, reasoning_content: "the user asked for a tool", tool_calls: [{ id: `call_${body.messages.length}`, type: "function", function: { name: m[1], arguments: JSON.stringify({ q: "x", n: 1 }) } }] }), (finish = "tool_calls");
  else if (last.role === "tool") msg = { role: "assistant", content: `The tool returned ${last.content}` };
  else msg = { role: "assistant", content: `You said: ${last.content}` };
  if (!body.stream) return Response.json({ id: "x", choices: [{ index: 0, message: msg, finish_reason: finish }] });
  const sse = [{ choices: [{ index: 0, delta: { content: msg.content }, finish_reason: null }] }, { choices: [{ index: 0, delta: {}, finish_reason: finish }] }];
  return new Response(sse.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n", { headers: { "Content-Type": "text/event-stream" } });
}
function newAgent() {
  const agent = new Agent({ provider: new OpenAiProvider({ baseURL: "http://scripted.invalid/v1/chat/completions", model: "m", fetch: scriptedFetch }), system: "be brief" });
  agent.scopes.register(new Scope({ name: "s", tools: [new Tool({ name: "lookup", description: "look up", parameters: z.object({ q: z.string(), n: z.number() }), handler: ({ q }) => ({ answer: 42, q }) })] }));
  return agent;
}

if (process.argv[2] === "child") {
  const [url, threadId] = process.argv.slice(3);
  const client = new ConvlogClient({ baseUrl: url, apiKey: KEY });
  const agent = newAgent();
  await agent.use(convlogPlugin({ client, threadId }));
  process.stdout.write(JSON.stringify(agent.history.getSnapshot()));
  process.exit(0);
}

const { startAgentd } = await import(`${JS}/packages/testing/dist/src/index.js`);
const agentd = await startAgentd();
const ok = (s) => console.log(`ok  ${s}`);
try {
  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: KEY });
  const threadId = "real ag2b #1";
  const a1 = newAgent();
  const cleanup = await a1.use(convlogPlugin({ client, threadId })); // the README's line
  assert.equal(typeof cleanup, "function");
  ok("await agent.use(convlogPlugin(...)) with the real Agent; it returns the cleanup");
  const r1 = await a1.chat("hello");
  assert.deepEqual(r1, { content: "You said: hello", reasoning: undefined, finishReason: "stop" });
  await a1.chat("use lookup");
  await a1.chat("thanks");
  const msgs = (await client.getThread(threadId, { consistent: true })).messages;
  assert.deepEqual(msgs.map((m) => m.role), ["user", "assistant", "user", "assistant", "tool", "assistant", "user", "assistant"]);
  ok(`8 messages stored in loop order: ${msgs.map((m) => m.role).join(" ")}`);

  const restored = execFileSync(process.execPath, [new URL(import.meta.url).pathname, "child", agentd.url, threadId], { encoding: "utf8" });
  assert.equal(restored, JSON.stringify(a1.history.getSnapshot()));
  ok("a fresh process restores the history byte-exact (JSON of getSnapshot)");

  const saved = [...a1.history.getSnapshot()];
  const plugin = convlogPlugin({ client, threadId });
  const a2 = newAgent();
  const cleanup2 = await a2.use(plugin);
  a2.history.reset();
  a2.history.restore(saved.slice(0, 2));
  await plugin.flush();
  const th = await client.getThread(threadId, { consistent: true, events: true });
  assert.equal(th.messages.length, 2);
  assert.deepEqual(th.events.map((e) => e.type).slice(-2), ["thread.reset", "thread.restored"]);
  ok("reset/restore of the real History are thread.reset/thread.restored events");

  const evs = [];
  for await (const ev of a2.chatStream("streamed")) evs.push(ev.type);
  const afterStream = (await client.getThread(threadId, { consistent: true })).messages;
  assert.deepEqual(afterStream.slice(2).map((m) => [m.role, m.content]), [["user", "streamed"], ["assistant", "You said: streamed"]]);
  ok(`chatStream saved once (${evs.length} events: ${[...new Set(evs)].join(", ")})`);

  cleanup2();
  cleanup();
  assert.equal(a2.history.reset, History.prototype.reset);
  assert.equal(a2.history.restore, History.prototype.restore);
  assert.ok(!Object.hasOwn(a2.history, "reset") && !Object.hasOwn(a2.history, "restore"));
  await a2.chat("after cleanup");
  a2.history.reset();
  await plugin.flush();
  const th2 = await client.getThread(threadId, { consistent: true, events: true });
  assert.equal(th2.messages.length, 4);
  assert.equal(th2.events.filter((e) => e.type === "thread.reset").length, 1);
  ok("the cleanup detaches the hook and puts History's reset/restore back");

  // convlog's chat endpoint as AG2B's model: one copy.
  const conversationId = "real-ag2b-conv";
  const seen = new Set();
  const provider = new OpenAiProvider({
    baseURL: `${agentd.url}/v1/chat/completions`, // AG2B posts to baseURL as given
    model: "demo",
    fetch: async (url, init) => {
      const headers = new Headers(init?.headers); // as the README does it
      headers.set("Authorization", `Bearer ${KEY}`);
      headers.set("X-Conversation-Id", conversationId);
      const r = await fetch(url, { ...init, headers });
      if (!r.ok) throw new Error(`${r.status} ${await r.text()}`);
      seen.add(r.headers.get("X-Convlog-Thread"));
      return r;
    },
  });
  const chatThread = await chatThreadId({ model: "demo", conversationId });
  const a3 = new Agent({ provider });
  const p3 = convlogPlugin({ client, threadId: chatThread, appendMessages: false });
  await a3.use(p3);
  const r3 = await a3.chat("What is 6*7?");
  for await (const _ of a3.chatStream("And 2+2?"));
  assert.deepEqual([...seen], [chatThread]);
  const chatMsgs = (await client.getThread(chatThread, { consistent: true })).messages;
  const users = chatMsgs.filter((m) => m.role === "user").map((m) => m.content);
  assert.deepEqual(users, ["What is 6*7?", "And 2+2?"]);
  ok(`chat endpoint as the model: thread ${chatThread} = chatThreadId, user messages stored once (${chatMsgs.map((m) => m.role).join(" ")}); answer ${JSON.stringify(r3.content).slice(0, 60)}`);
  const a4 = new Agent({ provider });
  await a4.use(convlogPlugin({ client, threadId: chatThread, appendMessages: false }));
  assert.deepEqual(a4.history.getSnapshot().filter((m) => m.role === "user").map((m) => m.content), users);
  ok("a fresh agent restores the chat endpoint's thread");
  console.log("ALL OK");
} finally {
  await agentd.stop();
}
