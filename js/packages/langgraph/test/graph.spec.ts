// Real @langchain/langgraph graphs on ConvlogSaver against a real agentd:
// the conversation is the thread's messages (what the web page and SSE
// readers read, GET /v1/threads/{id}), a long graph is not capped, and a
// graph resumes from its checkpoints in a fresh saver.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Annotation, END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { ConvlogClient } from "@convlog/client";
import { startAgentd, keys, type Agentd } from "@convlog/testing";
import { ConvlogSaver } from "../src/index.js";

let agentd: Agentd;
let client: ConvlogClient;

beforeAll(async () => {
  agentd = await startAgentd();
  client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
});
afterAll(async () => {
  await agentd?.stop();
});

/** An agent loop with a scripted model: it calls the weather tool once, then answers. */
function agentGraph(saver: ConvlogSaver) {
  const model = (state: typeof MessagesAnnotation.State) => {
    const last = state.messages[state.messages.length - 1];
    if (last instanceof ToolMessage) return { messages: [new AIMessage({ content: `It is ${last.content} there.` })] };
    return {
      messages: [new AIMessage({ content: "", tool_calls: [{ id: "call_1", name: "weather", args: { city: "Oslo" } }] })],
    };
  };
  const tools = (state: typeof MessagesAnnotation.State) => {
    const call = (state.messages[state.messages.length - 1] as AIMessage).tool_calls![0];
    return { messages: [new ToolMessage({ content: "sunny", tool_call_id: call.id!, name: call.name })] };
  };
  return new StateGraph(MessagesAnnotation)
    .addNode("model", model)
    .addNode("tools", tools)
    .addEdge(START, "model")
    .addConditionalEdges("model", (s) => ((s.messages[s.messages.length - 1] as AIMessage).tool_calls?.length ? "tools" : END))
    .addEdge("tools", "model")
    .compile({ checkpointer: saver });
}

describe("a LangGraph conversation on convlog", () => {
  it.each([
    ["message events beside the checkpoint", "events" as const],
    ["messages inside the checkpoint event", "checkpoint" as const],
  ])("is the thread's messages (%s): user, assistant with tool calls, tool result, assistant", async (_, messagesAs) => {
    const saver = new ConvlogSaver({ client, messagesAs });
    const graph = agentGraph(saver);
    const thread_id = `lg-messages-${messagesAs}-${Date.now()}`;
    await graph.invoke({ messages: [new HumanMessage("Weather in Oslo?")] }, { configurable: { thread_id } });
    await graph.invoke({ messages: [new HumanMessage("And tomorrow?")] }, { configurable: { thread_id }, durability: "sync" });

    // The API the web page reads (agentd/webui): the thread's projected messages.
    const th = await client.getThread(thread_id, { consistent: true });
    const got = (th.messages ?? []).map((m) => ({ role: m.role, content: m.content, tool_calls: m.tool_calls?.map((c) => [c.id, c.name, c.arguments]), tool_call_id: m.tool_call_id }));
    const turn = (q: string) => [
      { role: "user", content: q, tool_calls: undefined, tool_call_id: undefined },
      { role: "assistant", content: "", tool_calls: [["call_1", "weather", '{"city":"Oslo"}']], tool_call_id: undefined },
      { role: "tool", content: "sunny", tool_calls: undefined, tool_call_id: "call_1" },
      { role: "assistant", content: "It is sunny there.", tool_calls: undefined, tool_call_id: undefined },
    ];
    expect(got).toEqual([...turn("Weather in Oslo?"), ...turn("And tomorrow?")]);
    expect(th.message_count).toBe(8);
    expect(th.metadata?.source).toBe("langgraph");

    // A fresh saver (another process) resumes from the stored checkpoints,
    // and its next turn adds only the new messages.
    const again = agentGraph(new ConvlogSaver({ client, messagesAs }));
    const state = await again.getState({ configurable: { thread_id } });
    expect(state.values.messages).toHaveLength(8);
    await again.invoke({ messages: [new HumanMessage("Thanks")] }, { configurable: { thread_id } });
    const after = await client.getThread(thread_id, { consistent: true });
    expect(after.message_count).toBe(12);
  });

  it("keeps a graph of 600 steps with durability sync, every checkpoint listed", async () => {
    const Counter = Annotation.Root({ n: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }) });
    const saver = new ConvlogSaver({ client });
    const graph = new StateGraph(Counter)
      .addNode("step", () => ({ n: 1 }))
      .addEdge(START, "step")
      .addConditionalEdges("step", (s) => (s.n < 600 ? "step" : END))
      .compile({ checkpointer: saver });
    const thread_id = `lg-long-${Date.now()}`;
    const out = await graph.invoke({ n: 0 }, { configurable: { thread_id }, durability: "sync", recursionLimit: 1000 });
    expect(out.n).toBe(600);
    const latest = await saver.getTuple({ configurable: { thread_id } });
    expect(latest?.checkpoint.channel_values.n).toBe(600);
    let count = 0;
    for await (const _ of saver.list({ configurable: { thread_id } })) count++;
    expect(count).toBe(602); // the input, the first step's and one per step
  });
});
