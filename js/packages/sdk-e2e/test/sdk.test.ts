// convlog's /v1/chat/completions driven by the real TypeScript SDKs that
// chat front ends use: sticky sessions (two turns, one thread), streamed
// and not, and a turn in which convlog's agent runs a tool itself (the
// offline model calls its clock for "what time is it?"): no SDK is handed
// that call to run again (a streamed answer that carried it as tool_calls
// would make the SDKs execute it).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText } from "ai";
import { startAgentd, keys, type Agentd } from "@convlog/testing";

let agentd: Agentd;
before(async () => {
  agentd = await startAgentd();
});
after(async () => {
  await agentd?.stop();
});

test("openai 6.x: two turns stick to one thread, streamed and not, and a server-run tool is not the client's", async () => {
  const openai = new OpenAI({ baseURL: `${agentd.url}/v1`, apiKey: keys.acme, defaultHeaders: { "X-Conversation-Id": "ts-openai-1" } });
  const first = await openai.chat.completions.create({ model: "demo", messages: [{ role: "user", content: "my name is colt" }] }).withResponse();
  const thread = first.response.headers.get("x-convlog-thread");
  assert.ok(thread);
  assert.match(first.data.choices[0].message.content ?? "", /You said: "my name is colt"/);

  const stream = openai.chat.completions.stream({
    model: "demo",
    messages: [
      { role: "user", content: "my name is colt" },
      { role: "assistant", content: first.data.choices[0].message.content },
      { role: "user", content: "what time is it?" },
    ],
  });
  const final = await stream.finalChatCompletion();
  const msg = final.choices[0].message;
  assert.equal(msg.tool_calls?.length ?? 0, 0, "the SDK's final message holds no tool call for the client to run");
  assert.match(msg.content ?? "", /2026-01-02T03:04:05Z|\d{4}-\d{2}-\d{2}T/, "the answer uses the clock's result");
  assert.equal(final.choices[0].finish_reason, "stop");
  const again = await openai.chat.completions.create({ model: "demo", messages: [{ role: "user", content: "my name is colt" }] }).withResponse();
  assert.equal(again.response.headers.get("x-convlog-thread"), thread, "the same conversation id stays on its thread");
});

test("ai 6.x with @ai-sdk/openai-compatible: sticky turns, streamed and not, no tool call reaches the client", async () => {
  const convlog = createOpenAICompatible({
    name: "convlog",
    baseURL: `${agentd.url}/v1`,
    headers: { Authorization: `Bearer ${keys.acme}`, "X-Conversation-Id": "ts-ai-1" },
    includeUsage: true,
  });
  const first = await generateText({ model: convlog("demo"), prompt: "my name is colt" });
  assert.match(first.text, /You said: "my name is colt"/);

  const result = streamText({
    model: convlog("demo"),
    messages: [
      { role: "user", content: "my name is colt" },
      { role: "assistant", content: first.text },
      { role: "user", content: "what time is it?" },
    ],
  });
  const text = await result.text;
  const toolCalls = await result.toolCalls;
  const response = await result.response;
  assert.equal(toolCalls.length, 0, "no tool call is handed to the client");
  const parts: { type: string }[] = [];
  for (const m of response.messages) {
    if (Array.isArray(m.content)) parts.push(...(m.content as { type: string }[]));
  }
  assert.equal(parts.filter((p) => p.type === "tool-call" || p.type === "tool-result").length, 0, "no tool call or tool error in the response messages");
  assert.match(text, /2026-01-02T03:04:05Z|\d{4}-\d{2}-\d{2}T/);
  assert.equal(await result.finishReason, "stop");
});

test("openai 6.x: a client tool round trip: finish_reason tool_calls, the client's result answered", async () => {
  const openai = new OpenAI({ baseURL: `${agentd.url}/v1`, apiKey: keys.acme, defaultHeaders: { "X-Conversation-Id": "ts-openai-tools" } });
  const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
    { type: "function", function: { name: "get_weather", description: "the weather in a city", parameters: { type: "object" } } },
  ];
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: "user", content: "use get_weather" }];
  const first = await openai.chat.completions.stream({ model: "demo", messages, tools }).finalChatCompletion();
  assert.equal(first.choices[0].finish_reason, "tool_calls");
  const call = first.choices[0].message.tool_calls?.[0];
  assert.ok(call && call.type === "function");
  assert.equal(call.function.name, "get_weather");
  messages.push(first.choices[0].message, { role: "tool", tool_call_id: call.id, content: "sunny, 21 C" });
  const second = await openai.chat.completions.create({ model: "demo", messages, tools });
  assert.equal(second.choices[0].finish_reason, "stop");
  assert.match(second.choices[0].message.content ?? "", /sunny, 21 C/);
});

test("ai 6.x: a client tool runs in the client and its result is answered (stopWhen)", async () => {
  const { tool, stepCountIs, jsonSchema } = await import("ai");
  const convlog = createOpenAICompatible({
    name: "convlog",
    baseURL: `${agentd.url}/v1`,
    headers: { Authorization: `Bearer ${keys.acme}`, "X-Conversation-Id": "ts-ai-tools" },
  });
  let ran = 0;
  const result = await generateText({
    model: convlog("demo"),
    prompt: "use get_weather",
    tools: {
      get_weather: tool({
        description: "the weather in a city",
        inputSchema: jsonSchema<Record<string, never>>({ type: "object" }),
        execute: async () => {
          ran++;
          return "sunny, 21 C";
        },
      }),
    },
    stopWhen: stepCountIs(3),
  });
  assert.equal(ran, 1, "the client ran its tool once");
  assert.match(result.text, /sunny, 21 C/);
});

// A step that calls a tool the agent runs (the offline model's clock, for
// "what time is it?") and a client tool ("use get_weather"): the stream
// helpers accumulate delta.tool_calls by index, so its indexes count only
// the client's calls, from 0, and the final message holds the client's
// call alone.
const mixedPrompt = "what time is it? use get_weather";
const weatherParams = { type: "object" as const, properties: {} };

test("openai 6.x: finalChatCompletion() of a streamed turn that mixes a server-run tool and a client tool", async () => {
  const openai = new OpenAI({ baseURL: `${agentd.url}/v1`, apiKey: keys.acme, defaultHeaders: { "X-Conversation-Id": "ts-openai-mixed" } });
  const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
    { type: "function", function: { name: "get_weather", description: "the weather in a city", parameters: weatherParams } },
  ];
  const final = await openai.chat.completions.stream({ model: "demo", messages: [{ role: "user", content: mixedPrompt }], tools }).finalChatCompletion();
  assert.equal(final.choices[0].finish_reason, "tool_calls");
  const calls = final.choices[0].message.tool_calls ?? [];
  assert.equal(calls.length, 1, "the final message holds the client's call only");
  assert.ok(calls[0].type === "function" && calls[0].function.name === "get_weather");
});

test("openai 6.x: runTools({stream: true}) on a turn that mixes a server-run tool and a client tool", async () => {
  const openai = new OpenAI({ baseURL: `${agentd.url}/v1`, apiKey: keys.acme, defaultHeaders: { "X-Conversation-Id": "ts-openai-mixed-run" } });
  let ran = 0;
  const run = openai.chat.completions.runTools({
    model: "demo",
    stream: true,
    messages: [{ role: "user", content: mixedPrompt }],
    tools: [
      {
        type: "function",
        function: {
          name: "get_weather",
          description: "the weather in a city",
          parameters: weatherParams,
          function: async () => {
            ran++;
            return "sunny, 21 C";
          },
          parse: JSON.parse,
        },
      },
    ],
  });
  const content = await run.finalContent();
  assert.equal(ran, 1, "the client ran its tool once, and not the agent's clock");
  assert.match(content ?? "", /sunny, 21 C/, "the agent answers from the client's result");
});
