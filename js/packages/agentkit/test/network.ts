// The AgentKit network the tests run: one agent whose model is convlog's
// own OpenAI-compatible /v1/chat/completions (the offline agent "demo":
// "use NAME" calls the offered tool NAME), one client tool, and the
// @convlog/agentkit history. The model's conversation id is the run's
// thread id, so every turn goes to the same chat thread of the endpoint.
// Shared by the test and the resume process.
import { createAgent, createNetwork, createTool, openai, type Network } from "@inngest/agent-kit";
import { z } from "zod";
import { ConvlogClient } from "@convlog/client";
import { convlogHistory } from "../src/index.js";

export function makeNetwork(url: string, apiKey: string, threadId: string): { network: Network<Record<string, unknown>>; client: ConvlogClient } {
  const client = new ConvlogClient({ baseUrl: url, apiKey });
  const lookup = createTool({
    name: "lookup",
    description: "Looks the answer up.",
    parameters: z.object({}),
    handler: async () => ({ answer: 42 }),
  });
  const agent = createAgent({
    name: "helper",
    system: "You are a helpful assistant.",
    tools: [lookup],
    model: openai({ model: "demo", apiKey, baseUrl: `${url}/v1/`, defaultParameters: { metadata: { conversation_id: threadId } } as never }),
  });
  const network = createNetwork<Record<string, unknown>>({
    name: "convlog-demo",
    agents: [agent],
    // The agent again while its last call ran tools (so the model answers
    // from their results), then stop.
    router: ({ callCount, lastResult }) => (callCount === 0 || (lastResult?.toolCalls.length ?? 0) > 0 ? agent : undefined),
    maxIter: 4,
    history: convlogHistory({ client }),
  });
  return { network, client };
}
