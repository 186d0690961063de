// The official @langchain/langgraph-checkpoint-validation suite (1.1.1)
// against ConvlogSaver on a real agentd. Its published CLI is broken in
// 1.1.1, so the suite runs through its validate() export under vitest.
// Nothing is skipped or filtered.
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { ConvlogClient } from "@convlog/client";
import { startAgentd, keys, type Agentd } from "@convlog/testing";
import { ConvlogSaver } from "../src/index.js";

let agentd: Agentd | undefined;
let run = 0;

validate<ConvlogSaver>({
  checkpointerName: "@convlog/langgraph",
  beforeAllTimeout: 120_000,
  async beforeAll() {
    agentd = await startAgentd();
  },
  async afterAll() {
    await agentd?.stop();
  },
  createCheckpointer() {
    // Each suite marks its threads with its own source, so list() without
    // a thread sees only the threads that suite wrote (as a fresh
    // MemorySaver would).
    run += 1;
    return new ConvlogSaver({ client: new ConvlogClient({ baseUrl: agentd!.url, apiKey: keys.acme }), source: `lg-validation-${run}-${Date.now()}` });
  },
  async destroyCheckpointer(saver) {
    // "Clean up any state that the checkpointer wrote" (the suite's contract).
    for (const id of await saver.threadIds()) await saver.deleteThread(id);
  },
});
