/**
 * @convlog/ag2b: an AG2B plugin that keeps an agent's `History` in a
 * convlog thread. AG2B gives no history adapter slot (the agent creates its
 * `History` privately), so the integration is a plugin, AG2B's plugin shape
 * (a function of the agent, returning a cleanup):
 * `const cleanup = await agent.use(convlogPlugin({ client, threadId }))`.
 * It creates the thread if absent and restores its messages into the
 * agent's history; `agent.addHook("onMessage", …)` appends every message
 * the loop pushes (`chat` and `chatStream`); `history.reset()` and
 * `history.restore()` are wrapped so they become `thread.reset` and
 * `thread.restored` events. The cleanup removes the hook and puts reset
 * and restore back. Tool-call `arguments` (an object in AG2B) are stored as
 * their JSON text and parsed back on restore.
 *
 * With convlog's chat endpoint as AG2B's model, that endpoint stores the
 * conversation in a thread of its own: `appendMessages: false` with
 * `threadId: await chatThreadId(...)` keeps one copy.
 *
 * AG2B is not on the npm registry: this package is written against
 * `@ag2b/core` 0.1.0 (github.com/ag2b/ag2b, commit 4153da3) and tested
 * against a minimal implementation of its surface ({@link AG2BAgent}).
 *
 * @packageDocumentation
 */
import { ConvlogClient, ConvlogError, type Event } from "@convlog/client";

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

/** The part of AG2B's `History` the plugin uses (reset and restore are prototype methods in AG2B). */
export interface AG2BHistory {
  getSnapshot(): readonly ChatMessage[];
  reset(): void;
  restore(messages: ChatMessage[]): void;
}

/** The part of an AG2B `Agent` the plugin uses: its history and `addHook("onMessage", …)`, which returns a disposer. */
export interface AG2BAgent {
  readonly history: AG2BHistory;
  addHook(event: "onMessage", hook: (ctx: { readonly message: ChatMessage }) => void | Promise<void>): () => void;
}

/** What {@link AG2BPlugin} returns (AG2B's `Ag2bPluginCleanup`): detaches the plugin. */
export type AG2BPluginCleanup = () => void;

/**
 * The plugin: AG2B's `Ag2bPlugin`, a function `agent.use` awaits, returning
 * the cleanup; plus {@link AG2BPlugin.flush}.
 */
export interface AG2BPlugin {
  (agent: AG2BAgent): Promise<AG2BPluginCleanup>;
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
  /**
   * Append each message the loop pushes (default true). Set it to false when
   * the model is convlog's own chat endpoint, which stores the conversation
   * in its thread already: with `threadId` set to that thread
   * ({@link chatThreadId}) the plugin then only restores the thread and
   * records reset/restore, and the conversation is stored once.
   */
  appendMessages?: boolean;
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
 * Returns the plugin, for `await agent.use(convlogPlugin({ client, threadId }))`.
 * When AG2B runs it, it creates the thread if absent, restores its messages
 * into `agent.history`, adds an `onMessage` hook and wraps `history.reset`
 * and `history.restore`; it returns the cleanup (what `agent.use` returns),
 * which removes the hook and puts reset/restore back.
 *
 * Appends are in loop order (AG2B awaits each `onMessage` hook, `chat` and
 * `chatStream` alike); reset/restore events are appended in the background
 * in call order: call {@link AG2BPlugin.flush} before relying on them.
 * Errors: setup and the hook throw the client's ConvlogError (e.g. a fold
 * rejection: a tool result for a call that is not pending is 409), so
 * `agent.use` or the chat fails.
 */
export function convlogPlugin(opts: ConvlogPluginOptions): AG2BPlugin {
  const { client, threadId } = opts;
  const appendMessages = opts.appendMessages ?? true;
  let queue: Promise<void> = Promise.resolve();
  let failure: unknown;
  // A reset or restore of a thread the chat endpoint has not created yet
  // has nothing to record (its next turn sends the whole history).
  const absent = (err: unknown) => err instanceof ConvlogError && err.status === 404;
  const later = (f: () => Promise<unknown>) => {
    queue = queue.then(async () => {
      try {
        await f();
      } catch (err) {
        if (!appendMessages && absent(err)) return;
        failure ??= err;
      }
    });
  };
  const plugin = async (agent: AG2BAgent): Promise<AG2BPluginCleanup> => {
    // Appending, the plugin owns the thread and creates it; otherwise the
    // chat endpoint does (with its agent), and an absent thread is empty.
    let stored: Stored[] = [];
    if (appendMessages) await client.ensureThread(threadId, { pending_policy: "cancel", ...opts.thread });
    try {
      stored = (await client.getThread(threadId, { consistent: true })).messages as unknown as Stored[];
    } catch (err) {
      if (appendMessages || !absent(err)) throw err;
    }
    const msgs = stored.map(fromConvlog).filter((m): m is ChatMessage => m !== undefined);
    const history = agent.history;
    const { reset, restore } = history;
    const own = { reset: Object.hasOwn(history, "reset"), restore: Object.hasOwn(history, "restore") };
    restore.call(history, msgs);
    let attached = true;
    const wrappedReset = () => {
      reset.call(history);
      if (attached) later(() => client.append(threadId, [{ type: "thread.reset", payload: { reason: "ag2b history.reset()" } } as Event]));
    };
    const wrappedRestore = (messages: ChatMessage[]) => {
      restore.call(history, messages);
      if (!attached) return;
      const stored = messages.map(toConvlog);
      later(() => client.append(threadId, [{ type: "thread.restored", payload: { messages: stored, reason: "ag2b history.restore()" } } as Event]));
    };
    history.reset = wrappedReset;
    history.restore = wrappedRestore;
    const off = appendMessages
      ? agent.addHook("onMessage", async ({ message }) => {
          await queue;
          await client.append(threadId, [eventOf(message)]);
        })
      : () => {};
    return () => {
      if (!attached) return;
      attached = false;
      off();
      // Put back what was there: the prototype's methods (delete the own
      // wrappers) or own properties set before the plugin.
      if (history.reset === wrappedReset) {
        if (own.reset) history.reset = reset;
        else delete (history as Partial<AG2BHistory>).reset;
      }
      if (history.restore === wrappedRestore) {
        if (own.restore) history.restore = restore;
        else delete (history as Partial<AG2BHistory>).restore;
      }
    };
  };
  return Object.assign(plugin, {
    async flush() {
      await queue;
      if (failure) throw failure;
    },
  });
}

// The namespace of the conversation keys' thread ids (agentd's
// client.convNamespace): UUIDv5(URL namespace, "https://github.com/convlog/convlog/conversation-key").
const CONV_NAMESPACE = "32209211f11a5d27a73ec5f75382ed51";

/**
 * The id of the thread convlog's chat endpoint (`POST /v1/chat/completions`)
 * keeps a conversation in: what it returns in `X-Convlog-Thread` for a
 * request with `model` and the conversation key `conversationId` (sent as
 * `X-Conversation-Id` or `metadata.conversation_id`), for `user` (the
 * `X-User-Id` header or the body's `user`; none by default). Give it to
 * {@link convlogPlugin} with `appendMessages: false` to keep one copy of
 * the conversation. Uses Web Crypto (Node 20+, browsers).
 */
export async function chatThreadId({ model, conversationId, user = "" }: { model: string; conversationId: string; user?: string }): Promise<string> {
  const ns = Uint8Array.from(CONV_NAMESPACE.match(/../g)!.map((h) => parseInt(h, 16)));
  const name = new TextEncoder().encode(`${model}\0${user}\0${conversationId}`);
  const buf = new Uint8Array(ns.length + name.length);
  buf.set(ns);
  buf.set(name, ns.length);
  const h = new Uint8Array(await globalThis.crypto.subtle.digest("SHA-1", buf)).slice(0, 16);
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = [...h].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
