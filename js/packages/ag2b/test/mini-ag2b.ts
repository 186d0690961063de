// A minimal implementation of AG2B's documented Agent/History surface
// (seed 004: getSnapshot, subscribe, reset, restore; the loop pushes the
// user prompt, one assistant message per iteration and one tool message
// per executed call; plugins via agent.use with an awaited onMessage).
// AG2B is not on the npm registry, so the plugin is tested against this.
import type { AG2BPlugin, ChatMessage, AssistantMessage } from "../src/index.js";

class History {
  private messages: readonly ChatMessage[] = [];
  private listeners = new Set<() => void>();
  getSnapshot(): readonly ChatMessage[] {
    return this.messages;
  }
  subscribe(l: () => void): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
  reset(): void {
    this.messages = [];
    this.notify();
  }
  restore(messages: ChatMessage[]): void {
    this.messages = [...messages];
    this.notify();
  }
  push(m: ChatMessage): void {
    this.messages = [...this.messages, m];
    this.notify();
  }
  private notify() {
    for (const l of this.listeners) l();
  }
}

type Tool = (args: Record<string, unknown>) => Promise<unknown>;

/** The scripted provider: "use NAME" calls tool NAME with {q: "x"}; otherwise it echoes. */
function provide(history: readonly ChatMessage[]): AssistantMessage {
  const last = history[history.length - 1];
  if (last.role === "user") {
    const m = /^use (\w+)/.exec(last.content);
    if (m) return { role: "assistant", reasoning: "the user asked for a tool", calls: [{ id: `call_${history.length}`, name: m[1], arguments: { q: "x", n: 1 } }] };
    return { role: "assistant", content: `You said: ${last.content}`, metadata: { provider: "mini" } };
  }
  return { role: "assistant", content: `The tool returned ${(last as { content: string }).content}` };
}

export class MiniAgent {
  readonly history = new History();
  private plugins: AG2BPlugin[] = [];
  constructor(private tools: Record<string, Tool>) {}
  async use(p: AG2BPlugin): Promise<void> {
    await p.setup(this);
    this.plugins.push(p);
  }
  private async push(m: ChatMessage) {
    this.history.push(m);
    for (const p of this.plugins) await p.onMessage(m, this);
  }
  async chat(message: string): Promise<string> {
    await this.push({ role: "user", content: message });
    for (;;) {
      const a = provide(this.history.getSnapshot());
      await this.push(a);
      if (!a.calls?.length) return a.content ?? "";
      for (const c of a.calls) {
        const out = await this.tools[c.name](c.arguments);
        await this.push({ role: "tool", id: c.id, content: JSON.stringify(out) });
      }
    }
  }
}
