// A minimal implementation of AG2B's Agent/History surface, matching
// @ag2b/core 0.1.0 (github.com/ag2b/ag2b, commit 4153da3):
// - `agent.use(plugin)`: a plugin is a function `(agent) => Awaitable<void |
//   cleanup>`; `use` awaits it and returns the cleanup (or undefined);
// - `agent.addHook(event, hook)` returns a disposer; the `onMessage` hook
//   gets one context argument `{ message }`, runs after the message is in
//   the history, and is awaited (a throw fails the chat);
// - the loop pushes the user prompt, one assistant message per iteration
//   and one tool message per executed call;
// - `chat` returns `{ content, reasoning, finishReason }`; `chatStream`
//   runs the same loop and yields events; `system` is a constructor option.
// - History: getSnapshot, subscribe, push, reset, restore (reset and
//   restore are prototype methods, as in AG2B).
// AG2B is not on the npm registry, so the plugin is tested against this.
import type { AssistantMessage, ChatMessage } from "../src/index.js";

type Awaitable<T> = T | Promise<T>;

export class History {
  #messages: ChatMessage[] = [];
  #snapshot: ChatMessage[] = [];
  #listeners = new Set<() => void>();
  subscribe = (l: () => void): (() => void) => {
    this.#listeners.add(l);
    return () => this.#listeners.delete(l);
  };
  getSnapshot = (): ChatMessage[] => this.#snapshot;
  push(m: ChatMessage): void {
    this.#messages.push(m);
    this.#snapshot = [...this.#messages];
    this.#notify();
  }
  reset(): void {
    this.#messages = [];
    this.#snapshot = [];
    this.#notify();
  }
  restore(messages: ChatMessage[]): void {
    this.#messages = [...messages];
    this.#snapshot = [...this.#messages];
    this.#notify();
  }
  #notify() {
    for (const l of this.#listeners) l();
  }
}

export type FinishReason = "stop" | "tool_calls" | "length";
/** AG2B's AgentResponse. */
export type AgentResponse = { content?: string; reasoning?: string; finishReason?: FinishReason };
/** The part of AG2B's AgentEvent the stand-in emits. */
export type AgentEvent =
  | { type: "agent_chat_start"; message: string }
  | { type: "agent_content_delta"; delta: string }
  | { type: "agent_chat_done"; response: AgentResponse };
export type OnMessageCtx = { readonly message: ChatMessage };
export type AgentHooks = { onMessage: (ctx: OnMessageCtx) => Awaitable<void> };
export type Ag2bPluginCleanup = () => void;
export type Ag2bPlugin = (agent: MiniAgent) => Awaitable<void | Ag2bPluginCleanup>;

type Tool = (args: Record<string, unknown>) => Promise<unknown>;
type ProviderResponse = Omit<AssistantMessage, "role"> & { finishReason?: FinishReason };
type Provider = (request: { messages: ChatMessage[]; system?: string }) => Promise<ProviderResponse>;

/** The scripted provider: "use NAME" calls tool NAME with {q: "x", n: 1}; otherwise it echoes. */
async function scripted({ messages }: { messages: ChatMessage[] }): Promise<ProviderResponse> {
  const last = messages[messages.length - 1];
  if (last.role === "user") {
    const m = /^use (\w+)/.exec(last.content);
    if (m) return { reasoning: "the user asked for a tool", calls: [{ id: `call_${messages.length}`, name: m[1], arguments: { q: "x", n: 1 } }], finishReason: "tool_calls" };
    return { content: `You said: ${last.content}`, metadata: { provider: "mini" }, finishReason: "stop" };
  }
  return { content: `The tool returned ${(last as { content: string }).content}`, finishReason: "stop" };
}

export type MiniAgentConfig = {
  /** AG2B's provider; here a function (default: the scripted one above). */
  provider?: Provider;
  system?: string;
  maxIterations?: number;
  /** AG2B registers tools through scopes; the stand-in takes them by name. */
  tools?: Record<string, Tool>;
};

export class MiniAgent {
  readonly #history = new History();
  readonly #hooks: AgentHooks["onMessage"][] = [];
  readonly #provider: Provider;
  readonly #system?: string;
  readonly #maxIterations: number;
  readonly #tools: Record<string, Tool>;
  constructor({ provider = scripted, system, maxIterations = 20, tools = {} }: MiniAgentConfig) {
    this.#provider = provider;
    this.#system = system;
    this.#maxIterations = maxIterations;
    this.#tools = tools;
  }
  get history(): History {
    return this.#history;
  }
  addHook<K extends keyof AgentHooks>(_event: K, hook: AgentHooks[K]): () => void {
    this.#hooks.push(hook);
    return () => {
      const i = this.#hooks.indexOf(hook);
      if (i >= 0) this.#hooks.splice(i, 1);
    };
  }
  async use(plugin: Ag2bPlugin): Promise<Ag2bPluginCleanup | undefined> {
    const cleanup = await plugin(this);
    return typeof cleanup === "function" ? cleanup : undefined;
  }
  async #push(message: ChatMessage) {
    this.#history.push(message);
    for (const h of [...this.#hooks]) await h({ message });
  }
  async #run(message: string, emit?: (e: AgentEvent) => void): Promise<AgentResponse> {
    emit?.({ type: "agent_chat_start", message });
    await this.#push({ role: "user", content: message });
    for (let i = 0; ; ) {
      const { finishReason, ...r } = await this.#provider({ messages: this.#history.getSnapshot(), system: this.#system });
      const a: AssistantMessage = { role: "assistant" };
      if (r.content?.trim()) a.content = r.content;
      if (r.reasoning?.trim()) a.reasoning = r.reasoning;
      if (r.calls?.length) a.calls = r.calls;
      if (r.metadata) a.metadata = r.metadata;
      if (a.content) emit?.({ type: "agent_content_delta", delta: a.content });
      await this.#push(a);
      if (!a.calls?.length) {
        const response = { content: a.content, reasoning: a.reasoning, finishReason };
        emit?.({ type: "agent_chat_done", response });
        return response;
      }
      for (const c of a.calls) {
        const tool = this.#tools[c.name];
        const out = tool ? await tool(c.arguments) : { error: `unknown tool ${c.name}` };
        await this.#push({ role: "tool", id: c.id, content: JSON.stringify(out ?? null) });
      }
      if (++i >= this.#maxIterations) throw new Error(`max iterations (${i})`);
    }
  }
  chat(message: string): Promise<AgentResponse> {
    return this.#run(message);
  }
  async *chatStream(message: string): AsyncGenerator<AgentEvent> {
    const events: AgentEvent[] = [];
    await this.#run(message, (e) => events.push(e));
    yield* events;
  }
}
