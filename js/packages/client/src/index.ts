/**
 * @convlog/client: a typed client for convlog's REST API and its SSE event
 * streams. It runs wherever `fetch` and web streams exist (Node 20+,
 * browsers, Deno, Bun): the core uses no Node-only API. Node resolves the
 * package to `./node.js` (the `node` export condition), the same API
 * whose client sends requests with Node's `http` module instead of the
 * global `fetch` (see `nodeFetch` there).
 *
 * Types come from the API's OpenAPI 3.1 document (agentd/httpapi/openapi.json),
 * generated at build time by openapi-typescript; requests go through
 * openapi-fetch, so every route is typed, also those this class has no
 * method for ({@link ConvlogClient.api}).
 *
 * @packageDocumentation
 */
import createClient, { type Client } from "openapi-fetch";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import type { components, paths } from "./schema.js";

/** A thread's projected state (openapi.json `Thread`). */
export type Thread = components["schemas"]["Thread"];
/** One entry of a thread listing (openapi.json `ThreadSummary`). */
export type ThreadSummary = components["schemas"]["ThreadSummary"];
/** A page of a thread listing (openapi.json `ListPage`). */
export type ListPage = components["schemas"]["ListPage"];
/** An event to append: `type` and `payload` are required (openapi.json `Event`). */
export type Event = components["schemas"]["Event"];
/** A stored event: the event plus `seq` and `stored_at` (openapi.json `StoredEvent`). */
export type StoredEvent = components["schemas"]["StoredEvent"];
/** What an append stored (openapi.json `AppendResponse`). */
export type AppendResponse = components["schemas"]["AppendResponse"];
/** The body of a thread creation (openapi.json `CreateThreadRequest`). */
export type CreateThreadRequest = components["schemas"]["CreateThreadRequest"];
/** An RFC 9457 problem, as every error of the API is (openapi.json `Problem`). */
export type Problem = components["schemas"]["Problem"];
/** A stored blob: name, size (bytes), digest ("SHA-256=..."), content_type, lifetime, modified. */
export type BlobInfo = components["schemas"]["BlobInfo"];
/** What an erasure removed (`removed_events`, `last_seq`, the purged keys and blobs, `key_destroyed`). */
export type ErasureReport = components["schemas"]["ErasureReport"];
/** What a redaction did (`seq`, `event_id`, `type`, `fields`, `version` of the `event.redacted` event). */
export type RedactionReport = components["schemas"]["RedactionReport"];
/** A payload field a redaction can replace with `"[redacted]"` (`RedactRequest.fields`). */
export type RedactableField = NonNullable<components["schemas"]["RedactRequest"]["fields"]>[number];
/** What a verification against the signed audit checkpoints found (`ok`, `first_bad_seq`, `problems`, `last_checkpoint`; docs/audit.md). */
export type AuditReport = components["schemas"]["AuditReport"];
/**
 * A checkpoint trusted earlier: a report's `last_checkpoint.msg_seq` and
 * `last_checkpoint.hash`. A later verification given it fails
 * (`anchor-not-found`) when the log no longer holds that checkpoint.
 */
export interface AuditAnchor {
  /** The checkpoint message's stream sequence. */
  msg_seq: number;
  /** Its body's SHA-256, 64 hex digits. */
  hash: string;
}

/** Options of {@link ConvlogClient}. */
export interface ConvlogClientOptions {
  /** The API's base URL, e.g. `http://127.0.0.1:8080` (no trailing `/v1`). */
  baseUrl: string;
  /** The tenant's API key, sent as `Authorization: Bearer <key>`; omit when the server runs without keys. */
  apiKey?: string;
  /**
   * The fetch to use. Default: the global `fetch`; under Node, the
   * package's `nodeFetch` (Node's `http` module, far less CPU per request).
   */
  fetch?: typeof fetch;
  /** How requests the server refused for overload are retried (see {@link RetryOptions}); `false` turns retries off. */
  retry?: RetryOptions | false;
}

/**
 * Retries of requests the server answered 429 (rate limited, quota) or
 * 503 (overloaded, busy): such an answer stored nothing. A request that
 * got no answer at all (fetch rejected with a `TypeError`: the connection
 * was refused or closed under it) is sent again only when it may be sent
 * twice with the same effect (below); an aborted one never. A request is sent
 * again after the answer's `Retry-After` (seconds or an HTTP date) when it
 * has one, else after an exponential backoff from `baseMs`; either wait
 * is capped at `maxMs` and spread by full jitter (a random share of it,
 * at least half), so clients refused together do not come back together.
 * A 503 without `Retry-After` is retried only for a request that may be
 * sent twice with the same effect (it may come from a proxy that cannot
 * say whether the request ran): a GET, HEAD, PUT or DELETE, a request
 * with an `Idempotency-Key`, or an append without `expectVersion` whose
 * every event carries its `id`. After `attempts` answers in a
 * row the last one is returned (and thrown as a {@link ConvlogError}).
 */
export interface RetryOptions {
  /** Requests sent at most, the first included. Default 6. */
  attempts?: number;
  /** The first backoff in ms without `Retry-After`, doubled per attempt. Default 100. */
  baseMs?: number;
  /** The longest wait in ms. Default 10,000. */
  maxMs?: number;
}

/** A checkpoint as `GET /v1/threads/{id}/checkpoints` returns it: its `checkpoint.saved` event and the `checkpoint.writes` events that name it. */
export type StoredCheckpoint = components["schemas"]["CheckpointsResponse"]["checkpoints"][number];
/** The answer of `GET /v1/threads/{id}/checkpoints` (openapi.json `CheckpointsResponse`). */
export type CheckpointsPage = components["schemas"]["CheckpointsResponse"];

/**
 * A request the API refused: `status` is the HTTP status and `problem` the
 * RFC 9457 body, whose `code` (e.g. `"conflict"`, `"not-found"`), `field`,
 * `thread` and `current_version` say what was wrong and where.
 */
export class ConvlogError extends Error {
  /** The HTTP status code. */
  readonly status: number;
  /** The problem document (a minimal one when the body was not JSON). */
  readonly problem: Problem;
  constructor(status: number, problem: Problem) {
    super(`convlog: ${status} ${problem.code ?? ""}: ${problem.detail ?? problem.title ?? ""}`.trim());
    this.name = "ConvlogError";
    this.status = status;
    this.problem = problem;
  }
}

/** Options of {@link ConvlogClient.events}. */
export interface EventsOptions {
  /** Start after this sequence (0 or absent: from the first event). */
  after?: number;
  /** Ends the stream (the iterator returns). */
  signal?: AbortSignal;
  /** First reconnect delay in ms, doubled per failed attempt up to {@link EventsOptions.maxRetryMs}. Default 250. */
  retryMs?: number;
  /** Longest reconnect delay in ms. Default 10,000. */
  maxRetryMs?: number;
  /** Reconnect attempts in a row before the iterator throws the last error. Default 10. */
  maxAttempts?: number;
}

/**
 * A client of one convlog API for one tenant (the tenant is the API key's).
 * Methods throw {@link ConvlogError} for a refused request and the fetch's
 * error for a failed one. Instances are stateless apart from their options
 * and safe to share.
 */
export class ConvlogClient {
  /** The typed openapi-fetch client, for any route of openapi.json. */
  readonly api: Client<paths>;
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly fetchFn: typeof fetch;

  constructor(opts: ConvlogClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.headers = opts.apiKey ? { Authorization: `Bearer ${opts.apiKey}` } : {};
    const base: typeof fetch = opts.fetch ?? ((input, init) => fetch(input, init));
    this.fetchFn = opts.retry === false ? base : withRetry(base, opts.retry ?? {});
    this.api = createClient<paths>({ baseUrl: this.baseUrl, headers: this.headers, fetch: (req) => this.fetchFn(req) });
  }

  /**
   * Creates a thread (`POST /v1/threads`, 201). With `idempotencyKey` and no
   * `id`, a retry creates nothing twice. Throws 409 `thread-exists` when the
   * id is taken.
   */
  async createThread(body: CreateThreadRequest = {}, opts: { idempotencyKey?: string } = {}): Promise<Thread> {
    const r = await this.api.POST("/v1/threads", {
      body,
      params: { header: opts.idempotencyKey ? { "Idempotency-Key": opts.idempotencyKey } : {} },
    });
    return ok(r);
  }

  /**
   * Creates the thread `id` unless it exists (`PUT /v1/threads/{id}`): `created`
   * says which. An existing thread is returned as it is, whatever `body` says;
   * an erased id stays taken (409).
   */
  async ensureThread(id: string, body: CreateThreadRequest = {}): Promise<{ thread: Thread; created: boolean }> {
    const r = await this.api.PUT("/v1/threads/{id}", { params: { path: { id } }, body });
    return { thread: ok(r), created: r.response.status === 201 };
  }

  /**
   * Reads a thread (`GET /v1/threads/{id}`). `consistent` includes every
   * acknowledged event; `events` adds the stored events. Throws 404
   * `not-found` for a missing, erased or (without `include_deleted`)
   * deleted thread.
   */
  async getThread(
    id: string,
    query: { consistent?: boolean; at_seq?: number; as_of?: string; events?: boolean; include_deleted?: boolean } = {},
  ): Promise<Thread> {
    const r = await this.api.GET("/v1/threads/{id}", { params: { path: { id }, query } });
    return ok(r);
  }

  /** Lists the tenant's threads, newest first (`GET /v1/threads`); pass `next_cursor` as `cursor` for the next page. */
  async listThreads(query: { owner?: string; agent?: string; limit?: number; cursor?: string; include_deleted?: boolean } = {}): Promise<ListPage> {
    const r = await this.api.GET("/v1/threads", { params: { query } });
    return ok(r);
  }

  /**
   * Appends events as one atomic unit (`POST /v1/threads/{id}/events`).
   * `expectVersion` makes it conditional (If-Match): a thread at another
   * version throws 412 `version-conflict` with `current_version`.
   * `idempotencyKey` makes a retry store nothing twice.
   */
  async append(
    id: string,
    events: Event[],
    opts: { expectVersion?: number; idempotencyKey?: string } = {},
  ): Promise<AppendResponse> {
    return this.appendJSON(id, JSON.stringify({ events }), opts);
  }

  /**
   * {@link ConvlogClient.append} of a request body the caller serialized:
   * `body` is the JSON text of `{"events": [...]}` (openapi.json
   * `AppendRequest`), sent as it is. For callers that build the text
   * themselves, e.g. splicing values already serialized as JSON.
   * Throws {@link ConvlogError} as `append` does (422 for a body that is
   * not an append request, naming the field).
   */
  async appendJSON(id: string, body: string, opts: { expectVersion?: number; idempotencyKey?: string } = {}): Promise<AppendResponse> {
    const header: Record<string, string> = { "Content-Type": "application/json" };
    if (opts.expectVersion !== undefined) header["If-Match"] = `"${opts.expectVersion}"`;
    if (opts.idempotencyKey) header["Idempotency-Key"] = opts.idempotencyKey;
    return this.send<AppendResponse>("POST", `/v1/threads/${encodeURIComponent(id)}/events`, header, body);
  }

  /**
   * Reads a thread's framework checkpoints (`GET /v1/threads/{id}/checkpoints`):
   * `checkpoint.saved` events with their `checkpoint.writes`, newest
   * checkpoint id first; `ns` (absent: every namespace), `checkpoint_id`,
   * `before` (ids sorting before it) and `limit` (1 to 100, default 10)
   * select. Throws 404 `not-found` for a missing thread.
   */
  async checkpoints(id: string, query: { ns?: string; checkpoint_id?: string; before?: string; limit?: number } = {}): Promise<CheckpointsPage> {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, String(v));
    const qs = q.toString();
    return this.send<CheckpointsPage>("GET", `/v1/threads/${encodeURIComponent(id)}/checkpoints${qs ? `?${qs}` : ""}`, {});
  }

  /**
   * One request straight through the client's fetch (and its retries),
   * without openapi-fetch's Request objects: for the calls a busy caller
   * makes per step (appends, checkpoint reads). The answer's JSON, or a
   * {@link ConvlogError}.
   */
  private async send<T>(method: string, path: string, headers: Record<string, string>, body?: string): Promise<T> {
    const res = await this.fetchFn(`${this.baseUrl}${path}`, { method, headers: { ...this.headers, ...headers }, body });
    if (!res.ok) throw await errorOf(res);
    return (await res.json()) as T;
  }

  /**
   * Reads the thread's key-value state at its current version
   * (`GET /v1/threads/{id}/state`): every key, or those starting with
   * `prefix`, without reading the thread's history.
   */
  async getState(id: string, prefix?: string): Promise<{ version: number; kv: Record<string, unknown> }> {
    const r = await this.api.GET("/v1/threads/{id}/state", { params: { path: { id }, query: prefix ? { prefix } : {} } });
    return ok(r);
  }

  /**
   * Reads one key of the thread's state (`GET /v1/threads/{id}/state/{key}`);
   * `undefined` when the state does not hold it.
   */
  async getStateKey(id: string, key: string): Promise<{ value: unknown; version: number } | undefined> {
    const r = await this.api.GET("/v1/threads/{id}/state/{key}", { params: { path: { id, key } } });
    if (r.response.status === 404 && (r.error as Problem | undefined)?.code === "state-key-not-found") return undefined;
    const b = ok(r);
    return { value: b.value, version: b.version };
  }

  /**
   * Sets one key of the thread's state (`PUT /v1/threads/{id}/state/{key}`)
   * and returns the new thread version. `ifAbsent` sets it only if the
   * state does not hold it (412 `state-key-exists` otherwise);
   * `expectVersion` only if the thread is at that version (412
   * `version-conflict`).
   */
  async setStateKey(id: string, key: string, value: unknown, opts: { ifAbsent?: boolean; expectVersion?: number } = {}): Promise<number> {
    const header: Record<string, string> = {};
    if (opts.ifAbsent) header["If-None-Match"] = "*";
    if (opts.expectVersion !== undefined) header["If-Match"] = `"${opts.expectVersion}"`;
    const r = await this.api.PUT("/v1/threads/{id}/state/{key}", { params: { path: { id, key }, header }, body: { value } });
    return ok(r).version;
  }

  /**
   * Deletes one key of the thread's state (`DELETE /v1/threads/{id}/state/{key}`,
   * a state.deleted event) and returns the new thread version.
   */
  async deleteStateKey(id: string, key: string): Promise<number> {
    const r = await this.api.DELETE("/v1/threads/{id}/state/{key}", { params: { path: { id, key } } });
    return ok(r).version;
  }

  /**
   * The public key of the audit checkpoints (`GET /v1/audit/key`): standard
   * base64 of the Ed25519 key, and PEM. Throws {@link ConvlogError} with
   * code `audit-off` when the server signs none.
   */
  async auditKey(): Promise<{ algorithm: "Ed25519"; public_key: string; pem: string; checkpoint_subject: string }> {
    const r = await this.api.GET("/v1/audit/key", {});
    return ok(r);
  }

  /**
   * Verifies one thread against the signed checkpoints
   * (`GET /v1/threads/{id}/audit`): the server re-reads its stored events
   * and the checkpoints that name it. A report whose `ok` is false names
   * the first differing sequence; keep `last_checkpoint` as the `anchor` of
   * the next call to detect a rewritten log. Throws {@link ConvlogError}:
   * 404 for a thread with no event, 429 `audit-busy` (retry after a
   * second), 404 `audit-off`.
   */
  async verifyThread(id: string, anchor?: AuditAnchor): Promise<AuditReport> {
    const query = anchor ? { anchor_seq: anchor.msg_seq, anchor_hash: anchor.hash } : {};
    const r = await this.api.GET("/v1/threads/{id}/audit", { params: { path: { id }, query } });
    return ok(r);
  }

  /** As {@link ConvlogClient.verifyThread} for every thread of the API key's tenant (`GET /v1/audit/verify`). */
  async verifyTenant(anchor?: AuditAnchor): Promise<AuditReport> {
    const query = anchor ? { anchor_seq: anchor.msg_seq, anchor_hash: anchor.hash } : {};
    const r = await this.api.GET("/v1/audit/verify", { params: { query } });
    return ok(r);
  }

  /**
   * Soft-deletes a thread (`DELETE /v1/threads/{id}`, idempotent). Its id is
   * free again: a later {@link ConvlogClient.ensureThread} or
   * {@link ConvlogClient.createThread} starts a new lifetime with nothing of
   * the old one (whose events stay in the log for audit).
   */
  async deleteThread(id: string, reason?: string): Promise<{ version: number }> {
    const r = await this.api.DELETE("/v1/threads/{id}", { params: { path: { id } }, body: reason ? { reason } : undefined });
    return ok(r);
  }

  /**
   * Erases a thread irreversibly (`POST /v1/threads/{id}/erase` with
   * `confirm: true`): its events are purged, a `thread.erased` marker stays,
   * and its data key is destroyed, so that no copy of its content anywhere
   * on the server's disks can be read again (docs/audit.md#erasure). The id
   * stays taken. Throws a {@link ConvlogError} (`not-found` for a missing or
   * already erased thread).
   */
  async eraseThread(id: string, reason?: string): Promise<ErasureReport> {
    const r = await this.api.POST("/v1/threads/{id}/erase", { params: { path: { id } }, body: { confirm: true, reason } });
    return ok(r);
  }

  /**
   * Redacts one event of a thread irreversibly (`POST /v1/threads/{id}/redact`
   * with `confirm: true`; docs/audit.md#redaction): the event at stream
   * sequence `seq` keeps its place but reads with `fields` (every content
   * field when omitted) replaced by `"[redacted]"`; its original content
   * can no longer be read anywhere. `reason` is stored in the clear. Takes
   * about 7 seconds (a key rotation). Throws a {@link ConvlogError}
   * (`not-redactable` for an event stored in the clear, without content or
   * not of this thread).
   */
  async redact(id: string, seq: number, opts: { fields?: RedactableField[]; reason?: string } = {}): Promise<RedactionReport> {
    const r = await this.api.POST("/v1/threads/{id}/redact", {
      params: { path: { id } },
      body: { confirm: true, seq, fields: opts.fields, reason: opts.reason },
    });
    return ok(r);
  }

  /**
   * Stores `data` as the thread's blob `name` (`PUT /v1/threads/{id}/blobs/{name}`):
   * a value larger than one event can hold (the server's limit, 32 MiB by
   * default; 413 `too-large` beyond, nothing stored). `name` may contain
   * `/`. Replaces a blob of that name in the thread's current lifetime.
   */
  async putBlob(id: string, name: string, data: Uint8Array | string, contentType = "application/octet-stream"): Promise<BlobInfo> {
    const res = await this.fetchFn(this.blobUrl(id, name), {
      method: "PUT",
      headers: { ...this.headers, "Content-Type": contentType },
      body: typeof data === "string" ? data : new Blob([data as Uint8Array<ArrayBuffer>]),
    });
    if (!res.ok) throw await errorOf(res);
    return (await res.json()) as BlobInfo;
  }

  /** Reads the thread's blob `name` (`GET`); `undefined` when the current lifetime has none. */
  async getBlob(id: string, name: string): Promise<Uint8Array | undefined> {
    const res = await this.fetchFn(this.blobUrl(id, name), { headers: this.headers });
    if (res.status === 404) {
      const err = await errorOf(res);
      if (err.problem.code === "blob-not-found") return undefined;
      throw err;
    }
    if (!res.ok) throw await errorOf(res);
    return new Uint8Array(await res.arrayBuffer());
  }

  /** Deletes the thread's blob `name`; `false` when there was none. */
  async deleteBlob(id: string, name: string): Promise<boolean> {
    const res = await this.fetchFn(this.blobUrl(id, name), { method: "DELETE", headers: this.headers });
    if (res.status === 404) {
      const err = await errorOf(res);
      if (err.problem.code === "blob-not-found") return false;
      throw err;
    }
    if (!res.ok) throw await errorOf(res);
    return true;
  }

  private blobUrl(id: string, name: string): string {
    return `${this.baseUrl}/v1/threads/${encodeURIComponent(id)}/blobs/${encodeURIComponent(name)}`;
  }

  /**
   * Follows a thread's stored events over SSE (`GET /v1/threads/{id}/events`),
   * from `after` on, for as long as the caller iterates and `signal` is not
   * aborted. A dropped connection is resumed with `Last-Event-ID` = the last
   * sequence yielded, after a delay that doubles from `retryMs` up to
   * `maxRetryMs`, so every event is yielded once, in order, with no gap.
   * Throws {@link ConvlogError} for a refused stream (no retry: 404, 400),
   * and the last error after `maxAttempts` failed connections in a row.
   */
  async *events(id: string, opts: EventsOptions = {}): AsyncGenerator<StoredEvent, void, undefined> {
    let last = opts.after ?? 0;
    let delay = opts.retryMs ?? 250;
    const maxDelay = opts.maxRetryMs ?? 10_000;
    const maxAttempts = opts.maxAttempts ?? 10;
    let failures = 0;
    for (;;) {
      if (opts.signal?.aborted) return;
      let res: Response;
      try {
        const headers: Record<string, string> = { ...this.headers, Accept: "text/event-stream" };
        if (last > 0) headers["Last-Event-ID"] = String(last);
        res = await this.fetchFn(`${this.baseUrl}/v1/threads/${encodeURIComponent(id)}/events`, { headers, signal: opts.signal });
      } catch (err) {
        if (opts.signal?.aborted) return;
        if (++failures >= maxAttempts) throw err;
        await sleep(delay, opts.signal);
        delay = Math.min(delay * 2, maxDelay);
        continue;
      }
      if (!res.ok) {
        const err = await errorOf(res);
        if (res.status < 500 && res.status !== 429) throw err;
        if (++failures >= maxAttempts) throw err;
        await sleep(delay, opts.signal);
        delay = Math.min(delay * 2, maxDelay);
        continue;
      }
      let got = false;
      try {
        for await (const msg of sseMessages(res.body!)) {
          if (msg.event === "shutdown") break; // the server is stopping: resume
          if (!msg.id || msg.event === "delta") continue;
          const ev = JSON.parse(msg.data) as StoredEvent;
          last = ev.seq;
          got = true;
          failures = 0;
          delay = opts.retryMs ?? 250;
          yield ev;
        }
      } catch (err) {
        if (opts.signal?.aborted) return;
        if (!got && ++failures >= maxAttempts) throw err;
      }
      if (opts.signal?.aborted) return;
      await sleep(delay, opts.signal);
      delay = Math.min(delay * 2, maxDelay);
    }
  }
}

/** `f` retrying answers 429 and 503, and requests that got no answer, as {@link RetryOptions} says. */
function withRetry(f: typeof fetch, o: RetryOptions): typeof fetch {
  const attempts = Math.max(1, o.attempts ?? 6);
  const baseMs = o.baseMs ?? 100;
  const maxMs = o.maxMs ?? 10_000;
  return async (input, init) => {
    // A Request's body can be read once: read it here, once, and send
    // its bytes on every attempt (cheaper than a clone per attempt).
    const [url, sent] = input instanceof Request ? [input.url, await initOf(input, init)] : [input, init];
    const signal = sent?.signal ?? undefined;
    for (let attempt = 1; ; attempt++) {
      let res: Response;
      try {
        res = await f(url, sent);
      } catch (err) {
        // fetch's TypeError: no answer (connection refused, reset or
        // closed); whether the server ran the request is unknown.
        if (!(err instanceof TypeError) || signal?.aborted || attempt >= attempts || !replayable(url, sent)) throw err;
        const wait = Math.min(baseMs * 2 ** (attempt - 1), maxMs);
        await sleep(wait / 2 + Math.random() * (wait / 2), signal);
        continue;
      }
      if (attempt >= attempts || (res.status !== 429 && res.status !== 503)) return res;
      const after = retryAfterMs(res.headers.get("Retry-After"));
      if (res.status === 503 && after === undefined && !replayable(url, sent)) return res;
      const wait = Math.min(after ?? baseMs * 2 ** (attempt - 1), maxMs);
      await res.body?.cancel();
      await sleep(wait / 2 + Math.random() * (wait / 2), signal);
    }
  };
}

/**
 * The `init` that sends `req` again: its method, headers, signal,
 * redirect and credentials modes and its body read into bytes, with
 * `init`'s members over them (as `fetch(req, init)` does).
 */
async function initOf(req: Request, init: RequestInit | undefined): Promise<RequestInit> {
  const body = req.body !== null && init?.body === undefined ? await req.arrayBuffer() : undefined;
  return { method: req.method, headers: req.headers, signal: req.signal, redirect: req.redirect, credentials: req.credentials, body, ...init };
}

/**
 * Whether a request may be sent twice with the same effect: a GET, HEAD,
 * PUT or DELETE; a request with an `Idempotency-Key`; or an unconditional
 * append (no `If-Match`) whose every event carries its `id`, since the
 * server stores an event id once and answers a resent append with the
 * events it stored.
 */
function replayable(input: string | URL, init?: RequestInit): boolean {
  const method = (init?.method ?? "GET").toUpperCase();
  if (["GET", "HEAD", "PUT", "DELETE"].includes(method)) return true;
  const headers = new Headers(init?.headers);
  if (headers.has("Idempotency-Key")) return true;
  const url = new URL(String(input));
  if (method !== "POST" || headers.has("If-Match") || !/\/v1\/threads\/[^/]+\/events$/.test(url.pathname)) return false;
  try {
    const b = init?.body;
    const text = typeof b === "string" ? b : b instanceof ArrayBuffer || ArrayBuffer.isView(b) ? new TextDecoder().decode(b) : undefined;
    const events = text !== undefined ? (JSON.parse(text) as { events?: unknown }).events : undefined;
    return Array.isArray(events) && events.length > 0 &&
      events.every((e) => typeof e === "object" && e !== null && typeof (e as { id?: unknown }).id === "string" && (e as { id: string }).id !== "");
  } catch {
    return false;
  }
}

/** A Retry-After header (delay seconds or an HTTP date) in ms; undefined when absent or unreadable. */
function retryAfterMs(v: string | null): number | undefined {
  if (v === null || v.trim() === "") return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, t - Date.now());
}

/** The body of a successful openapi-fetch answer, or a ConvlogError. */
function ok<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.error !== undefined || r.data === undefined) {
    throw new ConvlogError(r.response.status, problemOf(r.error, r.response));
  }
  return r.data;
}

function problemOf(body: unknown, res: Response): Problem {
  if (body && typeof body === "object" && "status" in body) return body as Problem;
  return { type: "about:blank", title: res.statusText || "HTTP error", status: res.status, detail: typeof body === "string" ? body : undefined } as Problem;
}

async function errorOf(res: Response): Promise<ConvlogError> {
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  return new ConvlogError(res.status, problemOf(body, res));
}

/** The messages of an SSE body (https://html.spec.whatwg.org/multipage/server-sent-events.html), parsed by eventsource-parser. */
async function* sseMessages(body: ReadableStream<Uint8Array>): AsyncGenerator<EventSourceMessage> {
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (m) => queue.push(m) });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      parser.feed(decoder.decode(value, { stream: true }));
      while (queue.length > 0) yield queue.shift()!;
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });
}
