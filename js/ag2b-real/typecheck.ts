// The plugin's type against the real AG2B's: what agent.use accepts.
import type { Agent, Ag2bPlugin } from "@/index";
import { ConvlogClient } from "@convlog/client";
import { convlogPlugin } from "@convlog/ag2b";
declare const agent: Agent;
const client = new ConvlogClient({ baseUrl: "http://127.0.0.1:8080" });
const p: Ag2bPlugin = convlogPlugin({ client, threadId: "session-42" });
export const cleanup = () => agent.use(convlogPlugin({ client, threadId: "session-42" }));
void p;
