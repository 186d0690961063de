/**
 * @convlog/agentkit: an Inngest AgentKit 0.13 `HistoryConfig` that keeps a
 * network's conversation in a convlog thread.
 *
 * Mapping (exact both ways, see {@link convlogHistory}):
 * - the user message of a run (`appendUserMessage`) is one `message.user`
 *   event; on reload it comes back as an `AgentResult` of agent `"user"`
 *   with one text message, so user messages survive a reload;
 * - an `AgentResult` is one atomic append: one `message.assistant` event
 *   holding its text and its tool calls (the model's raw argument text when
 *   the result's `raw` response has it) plus one `tool.result` event per
 *   tool result, in order, `is_error` set for an `{error}` result; the
 *   result's `createdAt`, `checksum` and `id` ride in the assistant event's
 *   metadata, so a reloaded result has the same `checksum`;
 * - event ids are UUIDv5 of the thread, the message id or the result's
 *   checksum and the event's index, so an Inngest step retry (or any retry)
 *   of a hook stores nothing twice.
 *
 * @packageDocumentation
 */
import { AgentResult, type HistoryConfig, type History, type Message, type StateData, type ToolResultMessage } from "@inngest/agent-kit";
import { ConvlogClient, ConvlogError, type Event } from "@convlog/client";
import { v5 as uuidv5, v7 as uuidv7 } from "uuid";

/** The UUIDv5 namespace of the event ids this adapter derives. */
export const EVENT_ID_NAMESPACE = "9a3c6c0e-5d0b-5b8e-9d4e-6f1c2b7a8e41";

/** Options of {@link convlogHistory}. */
export interface ConvlogHistoryOptions {
  /** The convlog client (its API key picks the tenant). */
  client: ConvlogClient;
  /**
   * Attributes of threads this adapter creates: owner, agent, title,
   * metadata. `pending_policy` defaults to `"cancel"`: a tool call that
   * AgentKit never answered is closed when the next user message arrives,
   * instead of refusing it.
   */
  thread?: { owner?: string; agent?: string; title?: string; metadata?: Record<string, string>; pending_policy?: "reject" | "cancel" };
  /**
   * Makes a new thread id when the run's state has none (AgentKit's
   * `createThread` hook). Default: a UUIDv7. Any string works: convlog maps
   * ids that are not `[A-Za-z0-9_-]{1,128}` to its own (and reports both).
   */
  newThreadId?: () => string;
}

/** The metadata member the assistant event carries for an exact reload. */
interface ResultMeta {
  created_at: string;
  checksum: string;
  id?: string;
  /** The result's output as AgentKit had it, when the default rebuild from the event would differ. */
  output?: Message[];
  /** The result's tool results as AgentKit had them, when the default rebuild from the tool.result events would differ. */
  tool_results?: ToolResultMessage[];
}

type Stored = {
  role: string;
  content?: unknown;
  tool_calls?: { id: string; name: string; arguments: string }[];
  tool_call_id?: string;
  name?: string;
  is_error?: boolean;
  agent?: string;
  metadata?: Record<string, unknown>;
  event_id?: string;
  time?: string;
};

/**
 * Returns an AgentKit `HistoryConfig` storing the conversation in convlog.
 *
 * Thread id precedence (seed 001, AgentKit `initializeThread`): the run's
 * `state.threadId` when the caller gave one (created if absent, kept as it
 * is otherwise), else {@link ConvlogHistoryOptions.newThreadId}.
 *
 * Hooks are safe to retry: a repeated `appendUserMessage` with the same
 * message id, or `appendResults` with the same results, stores nothing new
 * (ids derived as in the package doc; convlog refuses an id reused for a
 * different event). When AgentKit runs inside an Inngest function, each
 * write also runs as an Inngest step, so a retried function does not
 * repeat it.
 *
 * Errors: every hook throws the client's {@link ConvlogError} for a refused
 * request (e.g. 404 for a thread erased meanwhile) and the fetch's error
 * when convlog cannot be reached; AgentKit then fails the run.
 */
export function convlogHistory<T extends StateData>(opts: ConvlogHistoryOptions): HistoryConfig<T> {
  const { client } = opts;
  const createBody = { pending_policy: "cancel" as const, ...opts.thread };
  const step = async <R>(ctx: { step?: History.Context<T>["step"] }, name: string, fn: () => Promise<R>): Promise<R> => {
    const tools = ctx.step as unknown as { run?: (id: string, f: () => Promise<R>) => Promise<R> } | undefined;
    return tools?.run ? ((await tools.run(name, fn)) as R) : fn();
  };
  return {
    createThread: async (ctx) => {
      const threadId = ctx.state.threadId ?? (opts.newThreadId ?? uuidv7)();
      await step(ctx, `convlog-create-thread-${threadId}`, async () => {
        await client.ensureThread(threadId, createBody);
      });
      return { threadId };
    },

    appendUserMessage: async (ctx) => {
      const threadId = requireThread(ctx.threadId);
      const m = ctx.userMessage;
      const ev: Event = {
        type: "message.user",
        id: uuidv5(`${threadId}\u0000user\u0000${m.id}`, EVENT_ID_NAMESPACE),
        payload: { content: m.content, metadata: { agentkit: { message_id: m.id, timestamp: m.timestamp.toISOString() } } },
      } as Event;
      await step(ctx, `convlog-user-${m.id}`, () => appendOnce(client, threadId, [ev]));
    },

    appendResults: async (ctx) => {
      const threadId = requireThread(ctx.threadId);
      for (const r of ctx.newResults) {
        if (r.agentName === "user" && r.toolCalls.length === 0 && r.output.every((m) => m.role === "user")) continue; // loaded, not new
        const evs = resultEvents(threadId, r);
        await step(ctx, `convlog-result-${r.checksum}`, () => appendOnce(client, threadId, evs));
      }
    },

    get: async (ctx) => {
      const threadId = requireThread(ctx.threadId);
      let th;
      try {
        th = await client.getThread(threadId, { consistent: true });
      } catch (err) {
        if (err instanceof ConvlogError && err.status === 404) return [];
        throw err;
      }
      return resultsOf(th.messages as unknown as Stored[]);
    },
  };
}

function requireThread(id: string | undefined): string {
  if (!id) throw new Error("@convlog/agentkit: the run has no thread id (AgentKit calls createThread first; is history configured on the network?)");
  return id;
}

/** Appends evs; a retry whose events are all stored already is a no-op (convlog answers it from the stored events). */
async function appendOnce(client: ConvlogClient, threadId: string, evs: Event[]): Promise<void> {
  await client.append(threadId, evs);
}

/** The events of one AgentResult: the assistant turn, then its tool results. */
export function resultEvents(threadId: string, r: AgentResult): Event[] {
  const id = (i: number) => uuidv5(`${threadId}\u0000${r.id ?? r.checksum}\u0000${i}`, EVENT_ID_NAMESPACE);
  const text: string[] = [];
  const calls: { id: string; name: string; arguments: string }[] = [];
  const raw = rawArguments(r.raw);
  for (const m of r.output) {
    if (m.type === "text") text.push(textOf(m.content));
    if (m.type === "tool_call") for (const t of m.tools) calls.push({ id: t.id, name: t.name, arguments: raw.get(t.id) ?? JSON.stringify(t.input ?? {}) });
  }
  const meta: ResultMeta = { created_at: r.createdAt.toISOString(), checksum: r.checksum };
  if (r.id) meta.id = r.id;
  const content = text.length > 0 ? text.join("") : null;
  const rebuilt = outputOf({ role: "assistant", content, tool_calls: calls }, undefined);
  if (JSON.stringify(rebuilt) !== JSON.stringify(r.output)) meta.output = r.output;
  const calledWith = callsOf(r.output);
  const rebuiltResults = r.toolCalls.map((t) => toolResultOf(t.tool.id, t.tool.name, JSON.stringify(t.content ?? null), calledWith));
  if (JSON.stringify(rebuiltResults) !== JSON.stringify(r.toolCalls)) meta.tool_results = r.toolCalls;
  const evs: Event[] = [
    {
      type: "message.assistant",
      id: id(0),
      payload: { content, ...(calls.length > 0 ? { tool_calls: calls } : {}), agent: r.agentName, metadata: { agentkit: meta } },
    } as Event,
  ];
  r.toolCalls.forEach((t, i) => {
    const c = t.content as { error?: unknown; data?: unknown } | undefined;
    const isError = !!c && typeof c === "object" && "error" in c && !("data" in c);
    evs.push({
      type: "tool.result",
      id: id(i + 1),
      payload: { tool_call_id: t.tool.id, name: t.tool.name, content: JSON.stringify(t.content ?? null), ...(isError ? { is_error: true } : {}) },
    } as Event);
  });
  return evs;
}

/** The model's raw argument text per tool call id, from an OpenAI-format raw response (empty otherwise). */
function rawArguments(raw: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  if (!raw) return out;
  try {
    const r = JSON.parse(raw) as { choices?: { message?: { tool_calls?: { id: string; function?: { arguments?: string } }[] } }[] };
    for (const c of r.choices ?? []) for (const t of c.message?.tool_calls ?? []) if (t.function?.arguments !== undefined) out.set(t.id, t.function.arguments);
  } catch {
    // not JSON: keep the parsed input
  }
  return out;
}

function textOf(c: unknown): string {
  if (typeof c === "string") return c;
  if (Array.isArray(c)) return c.map((p) => (p && typeof p === "object" && "text" in p ? String((p as { text: unknown }).text) : "")).join("");
  return c == null ? "" : String(c);
}

/** The AgentKit output of a stored assistant message (its metadata's exact output when it has one). */
function outputOf(m: Stored, meta: ResultMeta | undefined): Message[] {
  if (meta?.output) return meta.output;
  const out: Message[] = [];
  const text = textOf(m.content);
  const calls = m.tool_calls ?? [];
  if (m.content != null && text !== "") out.push({ type: "text", role: "assistant", content: text, stop_reason: calls.length > 0 ? "tool" : "stop" });
  if (calls.length > 0) {
    out.push({
      type: "tool_call",
      role: "assistant",
      stop_reason: "tool",
      tools: calls.map((c) => ({ type: "tool", id: c.id, name: c.name, input: parseOr(c.arguments, {}) as Record<string, unknown> })),
    });
  }
  return out;
}

function parseOr(s: unknown, dflt: unknown): unknown {
  if (typeof s !== "string") return dflt;
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

/** The tool calls of an output, by id. */
function callsOf(output: Message[]): Map<string, { name: string; input: Record<string, unknown> }> {
  const calls = new Map<string, { name: string; input: Record<string, unknown> }>();
  for (const msg of output) if (msg.type === "tool_call") for (const t of msg.tools) calls.set(t.id, { name: t.name, input: t.input });
  return calls;
}

/** The AgentKit tool result of a stored tool.result (content is its JSON text). */
function toolResultOf(id: string, name: string, content: unknown, calls: Map<string, { name: string; input: Record<string, unknown> }>): ToolResultMessage {
  const call = calls.get(id);
  return {
    type: "tool_result",
    role: "tool_result",
    tool: { type: "tool", id, name: call?.name ?? name, input: call?.input ?? {} },
    content: parseOr(textOf(content), null),
    stop_reason: "tool",
  };
}

/** The AgentResults of a thread's messages (see the package doc). */
export function resultsOf(messages: Stored[]): AgentResult[] {
  const out: AgentResult[] = [];
  let last: { result: AgentResult; calls: Map<string, { name: string; input: Record<string, unknown> }>; exact: boolean } | undefined;
  for (const m of messages) {
    const time = m.time ? new Date(m.time) : new Date(0);
    if (m.role === "user") {
      out.push(new AgentResult("user", [{ type: "text", role: "user", content: textOf(m.content) }], [], time, undefined, undefined, undefined, m.event_id));
      last = undefined;
    } else if (m.role === "assistant") {
      const meta = (m.metadata?.agentkit ?? undefined) as ResultMeta | undefined;
      const output = outputOf(m, meta);
      const created = meta ? new Date(meta.created_at) : time;
      const result = new AgentResult(m.agent ?? "", output, meta?.tool_results ? [...meta.tool_results] : [], created, undefined, undefined, undefined, meta?.id);
      out.push(result);
      last = { result, calls: callsOf(output), exact: !!meta?.tool_results };
    } else if (m.role === "tool" && last && !last.exact) {
      last.result.toolCalls.push(toolResultOf(m.tool_call_id ?? "", m.name ?? "", m.content, last.calls));
    }
  }
  return out;
}
