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
 *   of a hook stores nothing twice;
 * - a tool result's content is the tool's value: a string as it is,
 *   anything else as its JSON (what AgentKit sends the model);
 * - chat mode (`chat` option): the model is convlog's own chat endpoint and
 *   its thread is the history's thread (see {@link convlogHistory}).
 *
 * @packageDocumentation
 */
import { AgentResult, openai, type HistoryConfig, type History, type Message, type State, type StateData, type ToolResultMessage } from "@inngest/agent-kit";
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
  /**
   * Makes convlog's own OpenAI-compatible `/v1/chat/completions` the model
   * of the network, on the history's thread: see {@link ConvlogChatOptions}
   * and {@link ConvlogHistory.model}. Without it the model is any model and
   * the history is a thread of its own.
   */
  chat?: ConvlogChatOptions;
}

/**
 * Options of the chat mode of {@link convlogHistory}: the network's model is
 * convlog's chat endpoint, answered by one of the agents agentd serves, and
 * the endpoint's thread for the run's conversation is the history's thread.
 */
export interface ConvlogChatOptions {
  /** agentd's base URL, e.g. `http://127.0.0.1:8080` (the model posts to `{baseUrl}/v1/chat/completions`). */
  baseUrl: string;
  /** The API key of the tenant (the one of the history's client). */
  apiKey?: string;
  /** The agentd agent that answers (the request's `model`, see `GET /v1/models`), e.g. the offline `"demo"`. */
  agent: string;
  /** The user the conversation is scoped to (the request's `user`); default none. */
  user?: string;
  /**
   * How long `appendResults` waits for the agent to answer what it stored
   * for it (tool results no request carried, the user message of a run that
   * asked no model), so that the next run loads the answer. Default 60000 ms;
   * the run goes on after it either way.
   */
  answerTimeoutMs?: number;
}

/**
 * The history {@link convlogHistory} returns: AgentKit's `HistoryConfig`,
 * and, in chat mode, the model for a thread.
 */
export interface ConvlogHistory<T extends StateData> extends HistoryConfig<T> {
  /**
   * The AgentKit model (AgentKit's `openai()` pointed at convlog) that
   * answers the run on `threadId` (the run's `state.threadId`) through
   * convlog's chat endpoint, on the history's thread: the request carries
   * `threadId` as `metadata.conversation_id`, and its messages are put in
   * the thread's order (AgentKit sends the run's user message first, before
   * the history; here it comes after the history, where the thread has
   * it), so the endpoint appends only what is new. Give the network's
   * agents this model (AgentKit runs a network once: make one per run).
   *
   * Throws unless the history was made with {@link ConvlogHistoryOptions.chat}.
   */
  model(threadId: string): ReturnType<typeof openai>;
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
 * The run's own user message: AgentKit stores it (`appendUserMessage`)
 * before it loads the history (`get`), and puts it in every model request
 * itself; `get` leaves it out, so the model sees it once.
 *
 * Chat mode ({@link ConvlogHistoryOptions.chat}): the model is convlog's
 * chat endpoint ({@link ConvlogHistory.model}), and the history's thread is
 * the endpoint's thread for the conversation id `state.threadId`
 * ({@link chatThreadId}), so one thread holds the conversation. The
 * endpoint stores what the model requests carry (the user message, with
 * the agent's tools, and the results of the tools AgentKit ran) and the
 * agent stores its answers; `appendUserMessage` only notes the message, and
 * `appendResults` stores what no request carried: the user message when no
 * request stored it (only agents with other models ran), the results of
 * tools no later request sent, and the results of other models. The agent
 * answers each user message or tool result stored so, as it answers any
 * message of a chat thread; `appendResults` waits for that answer (so the
 * next run loads it). A run whose router calls no agent stores nothing in
 * chat mode (AgentKit saves no results then, and no request was made). The
 * run needs a `state.threadId` (the model needs it before the run).
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
export function convlogHistory<T extends StateData>(opts: ConvlogHistoryOptions): ConvlogHistory<T> {
  const { client, chat } = opts;
  const createBody = { pending_policy: "cancel" as const, ...opts.thread };
  const step = async <R>(ctx: { step?: History.Context<T>["step"] }, name: string, fn: () => Promise<R>): Promise<R> => {
    const tools = ctx.step as unknown as { run?: (id: string, f: () => Promise<R>) => Promise<R> } | undefined;
    return tools?.run ? ((await tools.run(name, fn)) as R) : fn();
  };
  /** The convlog thread of an AgentKit thread id. */
  const threadOf = (id: string) => (chat ? chatThreadId(chat.agent, chat.user ?? "", id) : id);
  /** The event id of the user message each run stored, left out by get (by run state: a later run has its own). */
  const ownUser = new WeakMap<State<T>, string>();
  /** Chat mode: what the runs on each AgentKit thread id have told the model. */
  const runs = new Runs();

  return {
    createThread: async (ctx) => {
      const key = ctx.state.threadId ?? (opts.newThreadId ?? uuidv7)();
      if (chat && !ctx.state.threadId) {
        throw new Error("@convlog/agentkit: chat mode needs the run's state.threadId (the model's conversation id, see history.model(threadId))");
      }
      const body = chat
        ? { ...createBody, agent: chat.agent, ...(chat.user ? { owner: chat.user } : {}),
          metadata: { ...createBody.metadata, conv_key: key.trim(), conv_tier: "body", conv_source: "metadata.conversation_id" } }
        : createBody;
      await step(ctx, `convlog-create-thread-${key}`, async () => {
        await client.ensureThread(threadOf(key), body);
      });
      return { threadId: key };
    },

    appendUserMessage: async (ctx) => {
      const key = requireThread(ctx.threadId);
      const threadId = threadOf(key);
      const m = ctx.userMessage;
      const ev = userEvent(threadId, m);
      if (chat) {
        // The model's first request stores it (with the agent's tools); appendResults stores it if no request did.
        // A step: a retried Inngest function counts the messages as they were before this run.
        const after = await step(ctx, `convlog-user-seen-${m.id}`, async () => (await readThread(client, threadId))?.messages?.length ?? 0);
        runs.start(key, { message: ev, content: textOf(m.content), after });
        return;
      }
      await step(ctx, `convlog-user-${m.id}`, () => appendOnce(client, threadId, [ev]));
      ownUser.set(ctx.state, ev.id!);
    },

    appendResults: async (ctx) => {
      const key = requireThread(ctx.threadId);
      const threadId = threadOf(key);
      const fresh = ctx.newResults.filter((r) => !(r.agentName === "user" && r.toolCalls.length === 0 && r.output.every((m) => m.role === "user"))); // loaded, not new
      if (!chat) {
        for (const r of fresh) await step(ctx, `convlog-result-${r.checksum}`, () => appendOnce(client, threadId, resultEvents(threadId, r)));
        return;
      }
      const run = runs.get(key);
      const fromChat = (r: AgentResult) => chatThreadOf(r.raw) === threadId;
      if (fresh.length === 0 && !run?.user) return;
      let th = await readThread(client, threadId);
      let asked = false;
      if (run?.user) {
        const u = run.user;
        const stored = (th?.messages ?? []).slice(u.after).some((m) => m.role === "user" && textOf(m.content) === u.content);
        run.user = undefined;
        if (!stored) {
          await step(ctx, `convlog-user-${u.message.id}`, () => appendOnce(client, threadId, [u.message]));
          th = await settle(client, threadId, chat.answerTimeoutMs);
        }
      }
      const pending = new Set((th?.pending ?? []).map((p) => p.id));
      for (const r of fresh) {
        if (!fromChat(r)) {
          await step(ctx, `convlog-result-${r.checksum}`, () => appendOnce(client, threadId, resultEvents(threadId, r)));
          continue;
        }
        // The endpoint stored the answer; store the results of the tools no request sent.
        const evs = resultEvents(threadId, r).slice(1).filter((ev) => pending.has((ev.payload as { tool_call_id: string }).tool_call_id));
        if (evs.length > 0) {
          await step(ctx, `convlog-tool-results-${r.checksum}`, () => appendOnce(client, threadId, evs));
          asked = true;
        }
      }
      // The agent answers what was appended for it: wait, so the next run loads the answer.
      if (asked) await settle(client, threadId, chat.answerTimeoutMs);
    },

    get: async (ctx) => {
      const key = requireThread(ctx.threadId);
      const th = await readThread(client, threadOf(key));
      if (!th) return [];
      const own = ownUser.get(ctx.state);
      const results = resultsOf((th.messages ?? []).filter((m) => !own || m.event_id !== own));
      if (chat) runs.loaded(key, results.reduce((n, r) => n + r.output.length + r.toolCalls.length, 0));
      return results;
    },

    model: (threadId: string) => {
      if (!chat) throw new Error("@convlog/agentkit: history.model needs the chat option of convlogHistory");
      const m = openai({
        model: chat.agent,
        apiKey: chat.apiKey ?? "",
        baseUrl: `${chat.baseUrl.replace(/\/+$/, "")}/v1/`,
        defaultParameters: { metadata: { conversation_id: threadId }, ...(chat.user ? { user: chat.user } : {}) } as never,
      });
      m.authKey = chat.apiKey ?? ""; // never openai()'s fallback, OPENAI_API_KEY, sent to convlog
      const onCall = m.onCall;
      m.onCall = (model, body) => {
        onCall?.call(m, model, body);
        inThreadOrder(body as unknown as { messages?: { role: string; content?: unknown }[] }, runs.get(threadId));
      };
      return m;
    },
  };
}

/** The message.user event of an AgentKit user message. */
function userEvent(threadId: string, m: { id: string; content: string; timestamp: Date }): Event {
  return {
    type: "message.user",
    id: uuidv5(`${threadId}\u0000user\u0000${m.id}`, EVENT_ID_NAMESPACE),
    payload: { content: m.content, metadata: { agentkit: { message_id: m.id, timestamp: m.timestamp.toISOString() } } },
  } as Event;
}

/** The parts of a thread the hooks read. */
interface ThreadView {
  messages?: Stored[] | null;
  pending?: { id?: string }[];
  last_user_answered?: boolean;
}

/** Reads a thread with every acknowledged event; undefined when it does not exist. */
async function readThread(client: ConvlogClient, threadId: string): Promise<ThreadView | undefined> {
  try {
    return (await client.getThread(threadId, { consistent: true })) as unknown as ThreadView;
  } catch (err) {
    if (err instanceof ConvlogError && err.status === 404) return undefined;
    throw err;
  }
}

/**
 * Waits until the thread's agent has answered: its last user message is
 * answered and no tool call is pending, or timeoutMs (default 60 s) passed.
 * Returns the thread as last read.
 */
async function settle(client: ConvlogClient, threadId: string, timeoutMs = 60_000): Promise<ThreadView | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const th = await readThread(client, threadId);
    if (!th || (th.last_user_answered !== false && (th.pending ?? []).length === 0) || Date.now() >= deadline) return th;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The thread a chat completion (an AgentResult's raw response) was answered on, from its "convlog" member. */
function chatThreadOf(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  try {
    return (JSON.parse(raw) as { convlog?: { thread?: string } }).convlog?.thread;
  } catch {
    return undefined;
  }
}

/** What one run on an AgentKit thread id has told the chat model (chat mode). */
interface ChatRun {
  /** The run's input, the user message AgentKit puts first in each request. */
  input: string;
  /** How many messages AgentKit's history holds before this run's results (what get loaded); undefined until get. */
  history?: number;
  /** The run's user message while no request or append is known to have stored it; after: the thread's message count before it. */
  user?: { message: Event; content: string; after: number };
}

/** The chat runs by AgentKit thread id, the oldest dropped beyond a bound (a run is short: it needs its entry only while it lasts). */
class Runs {
  private readonly byKey = new Map<string, ChatRun>();
  start(key: string, user: { message: Event; content: string; after: number }): void {
    this.byKey.delete(key);
    this.byKey.set(key, { input: user.content, user });
    if (this.byKey.size > 10_000) this.byKey.delete(this.byKey.keys().next().value as string);
  }
  loaded(key: string, history: number): void {
    const r = this.byKey.get(key);
    if (r) r.history = history;
  }
  get(key: string): ChatRun | undefined {
    return this.byKey.get(key);
  }
}

/**
 * Puts a chat request's messages in the thread's order. AgentKit sends
 * [system, the run's user message, ...history, ...this run's results]; the
 * thread holds [...history, the user message, ...results]. With the
 * history's length known (from get) and the second message being the run's
 * input, the user message moves after the history; anything else is left
 * as it is.
 */
function inThreadOrder(body: { messages?: { role: string; content?: unknown }[] }, run: ChatRun | undefined): void {
  const ms = body.messages;
  if (!ms || !run || run.history === undefined) return;
  const n = run.history;
  if (ms.length < 2 + n || ms[0].role !== "system" || ms[1].role !== "user" || ms[1].content !== run.input) return;
  body.messages = [ms[0], ...ms.slice(2, 2 + n), ms[1], ...ms.slice(2 + n)];
}

/**
 * The thread id convlog's chat endpoint uses for a conversation: the UUIDv5
 * of agent, user and conversation key (agentd's `client.ConvKey.ThreadID`;
 * the endpoint trims the user and the key). It names the thread of the
 * requests whose `model` is `agent`, whose `user` (or `X-User-Id`) is `user`
 * and whose `metadata.conversation_id` (or `X-Conversation-Id`) is `key`.
 */
export function chatThreadId(agent: string, user: string, key: string): string {
  return uuidv5(`${agent}\u0000${user.trim()}\u0000${key.trim()}`, CONVERSATION_NAMESPACE);
}

/** agentd's UUIDv5 namespace of conversation thread ids. */
const CONVERSATION_NAMESPACE = uuidv5("https://github.com/convlog/convlog/conversation-key", uuidv5.URL);

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
  const rebuiltResults = r.toolCalls.map((t) => toolResultOf(t.tool.id, t.tool.name, toolContent(t.content), calledWith));
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
      payload: { tool_call_id: t.tool.id, name: t.tool.name, content: toolContent(t.content), ...(isError ? { is_error: true } : {}) },
    } as Event);
  });
  return evs;
}

/**
 * The stored content of a tool result: a string as it is, anything else as
 * its JSON, as AgentKit's OpenAI adapter sends it to the model (so the
 * thread holds what the model saw, encoded once).
 */
function toolContent(c: unknown): string {
  return typeof c === "string" ? c : JSON.stringify(c ?? null);
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
