/**
 * @convlog/ag2b: an AG2B plugin that keeps an agent's `History` (seed 004)
 * in a convlog thread. AG2B gives no history adapter slot (the agent
 * creates its `History` privately), so the integration is a plugin:
 * `agent.use(convlogPlugin({ client, threadId }))`. At setup it creates
 * the thread if absent and restores its messages into the agent's
 * history; every message the loop pushes reaches the awaited `onMessage`
 * hook and is appended as an event; `history.reset()` and
 * `history.restore()` are wrapped so they become `thread.reset` and
 * `thread.restored` events. Tool-call `arguments` (an object in AG2B) are
 * stored as their JSON text and parsed back on restore.
 *
 * AG2B is not on the npm registry: this package is written against the
 * documented `Agent`/`History` surface ({@link AG2BAgent}) and tested
 * against a minimal implementation of it.
 *
 * @packageDocumentation
 */
import { ConvlogClient, type Event } from "@convlog/client";

/** AG2B's user prompt (seed 004). */
export type UserMessage = { role: "user"; content: string };
/** AG2B's tool call: `arguments` is the parsed object. */
export type AssistantToolCall = { id: string; name: string; arguments: Record<string, unknown> };
/** AG2B's assistant reply (seed 004). */
export type AssistantMessage = { role: "assistant"; content?: string; reasoning?: string; calls?: AssistantToolCall[]; metadata?: Record<string, unknown> };
/** AG2B's tool result: `id` matches the call, `content` is the JSON-stringified return value. */
export type ToolMessage = { role: "tool"; id: string; content: string };
/** One message of an AG2B history. */
export type ChatMessage = UserMessage | AssistantMessage | ToolMessage;

/** The part of AG2B's `History` the plugin uses (seed 004). */
export interface AG2BHistory {
  getSnapshot(): readonly ChatMessage[];
  reset(): void;
  restore(messages: ChatMessage[]): void;
}

/** The part of an AG2B `Agent` the plugin uses. */
export interface AG2BAgent {
  history: AG2BHistory;
}

/** An AG2B plugin: `setup` runs once from `agent.use`, `onMessage` is awaited after every push of the loop. */
export interface AG2BPlugin {
  name: string;
  setup(agent: AG2BAgent): Promise<void>;
  onMessage(message: ChatMessage, agent: AG2BAgent): Promise<void>;
  /** Waits for the reset/restore events appended in the background (AG2B's reset and restore are synchronous); throws the first append error. */
  flush(): Promise<void>;
}

/** Options of {@link convlogPlugin}. */
export interface ConvlogPluginOptions {
  client: ConvlogClient;
  /** The thread (any string: convlog maps ids outside `[A-Za-z0-9_-]{1,128}`). */
  threadId: string;
  /** Attributes of the thread if the plugin creates it. */
  thread?: { owner?: string; agent?: string; title?: string; system_prompt?: string };
}

type Stored = { role: string; content?: unknown; tool_calls?: { id: string; name: string; arguments: string }[]; tool_call_id?: string; reasoning?: string; metadata?: Record<string, unknown> };

/** The convlog message (event payload form) of an AG2B message. */
export function toConvlog(m: ChatMessage): Stored {
  switch (m.role) {
    case "user":
      return { role: "user", content: m.content };
    case "tool":
      return { role: "tool", tool_call_id: m.id, content: m.content };
    case "assistant": {
      const s: Stored = { role: "assistant", content: m.content ?? null };
      if (m.reasoning) s.reasoning = m.reasoning;
      if (m.calls?.length) s.tool_calls = m.calls.map((c) => ({ id: c.id, name: c.name, arguments: JSON.stringify(c.arguments ?? {}) }));
      if (m.metadata) s.metadata = m.metadata;
      return s;
    }
  }
}

/** The AG2B message of a stored convlog message (system messages and unknown roles give undefined). */
export function fromConvlog(m: Stored): ChatMessage | undefined {
  const text = typeof m.content === "string" ? m.content : Array.isArray(m.content) ? m.content.map((p: { text?: string }) => p.text ?? "").join("") : undefined;
  switch (m.role) {
    case "user":
      return { role: "user", content: text ?? "" };
    case "tool":
      return { role: "tool", id: m.tool_call_id ?? "", content: text ?? "" };
    case "assistant": {
      const a: AssistantMessage = { role: "assistant" };
      if (text !== undefined) a.content = text;
      if (m.reasoning) a.reasoning = m.reasoning;
      if (m.tool_calls?.length) a.calls = m.tool_calls.map((c) => ({ id: c.id, name: c.name, arguments: JSON.parse(c.arguments || "{}") as Record<string, unknown> }));
      if (m.metadata) a.metadata = m.metadata;
      return a;
    }
  }
  return undefined;
}

function eventOf(m: ChatMessage): Event {
  const s = toConvlog(m);
  const { role, ...payload } = s;
  const type = role === "user" ? "message.user" : role === "assistant" ? "message.assistant" : "tool.result";
  return { type, payload } as Event;
}

/**
 * Returns the plugin. Appends are in loop order (each `onMessage` is
 * awaited by AG2B); reset/restore events are appended in the background in
 * call order — call {@link AG2BPlugin.flush} before relying on them.
 * Errors: `setup` and `onMessage` throw the client's ConvlogError (e.g. a
 * fold rejection: a tool result for a call that is not pending is 409),
 * so AG2B fails the chat.
 */
export function convlogPlugin(opts: ConvlogPluginOptions): AG2BPlugin {
  const { client, threadId } = opts;
  let queue: Promise<void> = Promise.resolve();
  let failure: unknown;
  const later = (f: () => Promise<unknown>) => {
    queue = queue.then(async () => {
      try {
        await f();
      } catch (err) {
        failure ??= err;
      }
    });
  };
  return {
    name: "convlog",
    async setup(agent) {
      await client.ensureThread(threadId, { pending_policy: "cancel", ...opts.thread });
      const th = await client.getThread(threadId, { consistent: true });
      const msgs = (th.messages as unknown as Stored[]).map(fromConvlog).filter((m): m is ChatMessage => m !== undefined);
      const { reset, restore } = agent.history;
      restore.call(agent.history, msgs);
      agent.history.reset = () => {
        reset.call(agent.history);
        later(() => client.append(threadId, [{ type: "thread.reset", payload: { reason: "ag2b history.reset()" } } as Event]));
      };
      agent.history.restore = (messages: ChatMessage[]) => {
        restore.call(agent.history, messages);
        const stored = messages.map(toConvlog);
        later(() => client.append(threadId, [{ type: "thread.restored", payload: { messages: stored, reason: "ag2b history.restore()" } } as Event]));
      };
    },
    async onMessage(message) {
      await queue;
      await client.append(threadId, [eventOf(message)]);
    },
    async flush() {
      await queue;
      if (failure) throw failure;
    },
  };
}
