// Package httpapi is convlog's HTTP API: REST for threads, server-sent
// events of a thread's log with resume, and an OpenAI-compatible
// /v1/chat/completions with sticky multi-turn sessions. agentd mounts
// [Server.Handler]; every endpoint is documented in the embedded OpenAPI 3.1
// document served at GET /openapi.json ([OpenAPI]); a test keeps the two
// in step.
//
// # Routes
//
//	GET    /openapi.json                 this API's OpenAPI 3.1 document (public)
//	GET    /healthz                      200, or 503 while NATS is disconnected or the store's disk is full (public)
//	GET    /v1/models                    the agents served, as OpenAI models
//	GET    /v1/models/{model}            one agent
//	POST   /v1/chat/completions          OpenAI-compatible chat (see below)
//	POST   /v1/threads                   create (id, owner, agent, system_prompt, title, metadata, replies, pending_policy)
//	GET    /v1/threads                   list: owner, agent, metadata.<k>=<v>, limit, cursor, include_deleted
//	GET    /v1/threads/{id}              read: consistent, at_seq, as_of (RFC 3339), events, include_deleted; ETag = version
//	PUT    /v1/threads/{id}              create if absent: 201 created, 200 the existing thread as it is (erased: 409; soft-deleted: 201, a new lifetime)
//	DELETE /v1/threads/{id}              soft delete (idempotent)
//	POST   /v1/threads/{id}/events       append one event or an atomic turn: {"events": [{"type", "id"?, "payload"}]}
//	GET    /v1/threads/{id}/events       SSE stream (Accept: text/event-stream), else a JSON page (after, limit)
//	POST   /v1/threads/{id}/fork         {at_seq?, id?}
//	POST   /v1/threads/{id}/undelete     reverse a soft delete (idempotent)
//	POST   /v1/threads/{id}/erase        {"confirm": true, reason?}: purge irreversibly; returns the report
//	POST   /v1/threads/{id}/redact       {"seq", "fields"?, "reason"?, "confirm": true}: make one event's content unreadable for good (a key rotation)
//	GET    /v1/threads/{id}/export       ?format=events|openai: streamed JSON lines (application/x-ndjson)
//	GET    /v1/threads/{id}/checkpoints  framework checkpoints (ns, checkpoint_id, before, limit): checkpoint.saved events with their writes, newest id first
//	GET    /v1/threads/{id}/state        the key-value state at the current version (?prefix=), from the snapshot's head and the log's tail
//	GET    /v1/threads/{id}/state/{key}  one key (URL-encoded; 404 state-key-not-found)
//	PUT    /v1/threads/{id}/state/{key}  {"value": ...}: set; If-None-Match: * set-if-absent (412 state-key-exists), If-Match compare-and-set
//	DELETE /v1/threads/{id}/state/{key}  delete (If-Match optional)
//	PUT    /v1/threads/{id}/blobs/{name} store the body as a blob (Config.MaxBlobBytes, 32 MiB; 413 beyond); name may hold '/'
//	GET    /v1/threads/{id}/blobs/{name} the blob's bytes (ETag: its digest; 404 blob-not-found)
//	DELETE /v1/threads/{id}/blobs/{name} delete it (204)
//	GET    /v1/threads/{id}/audit        verify the thread against the signed checkpoints (anchor_seq, anchor_hash)
//	GET    /v1/audit/verify              verify the tenant's threads the same way
//	GET    /v1/audit/key                 the public key that verifies the checkpoints (public)
//
// Appends take If-Match: "<version>" (the ETag of a read) for optimistic
// concurrency ([client.ExpectVersion]); without it they apply at any version
// ([client.AnyVersion]). An Idempotency-Key header derives the ids of events
// that carry none (UUIDv5 of tenant, thread, key and index), so a retried
// request stores nothing twice; on create and fork it also derives the new
// thread's id. Request bodies are limited (Config.MaxBodyBytes). A JSON
// body is sent as Content-Type: application/json, with no parameter but
// charset=utf-8, and without a content coding (Content-Encoding: identity
// or none); a request without a body, where the route takes none, needs no
// Content-Type. An event of an append holds the members of
// schemas/envelope.json only ("seq" and "stored_at" are the log's).
//
// A thread id is 1..128 bytes of [A-Za-z0-9_-]. Any other UTF-8 string of
// up to 1,024 bytes (percent-encoded in the path) is an external id, as
// AgentKit and LangGraph allow: it maps to the thread id ext- + the
// lower-case base32 of the first 20 bytes of its SHA-256
// ([events.ThreadIDFor]), the thread keeps it (external_id), and both work
// in every path. Ids of that mapped form cannot be chosen as thread ids.
// A soft-deleted thread's id is free: a create starts the thread's next
// lifetime (lifetime, lifetime_seq), whose state holds nothing of the
// earlier one; the earlier lifetime's events stay in the log (events,
// at_seq). Blobs are values larger than one event (LangGraph checkpoints)
// kept in the JetStream object store per thread and lifetime
// ([client.Client.PutBlob]); erase deletes them.
//
// # Errors
//
// Every error is an RFC 9457 application/problem+json [Problem] whose type
// is urn:convlog:problem:<code> and whose extension members name the
// field, the thread, the sequence, the event and the versions involved.
// Mapping:
//
//	malformed JSON, trailing data, empty body        400 malformed-json
//	bad id in the path or body                        400 bad-id          (field "id")
//	bad query parameter / header / list cursor        400 bad-query, bad-header, bad-cursor (also a query string that is not valid URL encoding, any route)
//	missing, malformed or unknown API key             401 unauthorized    (WWW-Authenticate: Bearer)
//	unknown thread, another tenant's thread, erased   404 not-found       (never 403)
//	unknown model                                     404 model-not-found (field "model")
//	thread id taken (create, fork)                    409 thread-exists
//	version conflict without If-Match                 409 conflict
//	chat history diverged from the thread             409 history-diverged
//	If-Match names another version                    412 version-conflict (current_version, ETag)
//	body or event too large                           413 too-large       (limit)
//	body not application/json (charset=utf-8 or none) 415 unsupported-media-type (field "Content-Type"; also when it is missing)
//	body sent with a Content-Encoding but identity    415 unsupported-media-type (field "Content-Encoding"; Accept-Encoding: identity)
//	wrong JSON type, unknown field, invalid request   422 invalid-request (field: the exact path, e.g. "events[0].payload.content[1].text";
//	                                                      payloads and create bodies are checked against schemas/, unknown fields refused at any
//	                                                      depth, an event's envelope included, e.g. "events[0].seq")
//	event fails validation                            422 invalid-event   (field "events[i].payload....")
//	event rejected by the fold                        422 rejected        (code = the fold's code, seq, event_id)
//	Idempotency-Key / event id reused, other request  422 idempotency-mismatch (field "Idempotency-Key" or "events[i].id", seq)
//	after / Last-Event-ID past the thread's version   400 bad-query, bad-header (field "after" / "Last-Event-ID")
//	request body not in within ReadTimeout            408 request-timeout (connection closed)
//	declared Content-Length above the body limit      413 too-large       (before reading; no 100 Continue)
//	stream memory budget in use (events page)         503 busy            (Retry-After: 1)
//	reading the log failed                            503 unavailable     (the cause is logged, not returned)
//	anything else                                     500 internal        (the cause is logged under the reference the detail gives)
//	MaxConns open, none idle; or MaxConnsPerAddr      503 overloaded      (written by the listener, then closed; Retry-After: 1)
//	NATS refused a write as busy on every attempt     503 overloaded      (Retry-After: 1; also with no stream leader; the detail
//	                                                      says whether nothing was stored; client.ErrOverloaded)
//	agent did not answer in time                      504 answer-timeout  (the answer still lands in the thread)
//	no storage left (server refusal, or a full disk)  507 storage-full    (Retry-After: 10; nothing stored; /healthz 503 meanwhile)
//	tenant over its quota (agentd --quota-file)       429 quota-exceeded  (code "storage" with limit in bytes, or "rate" with
//	                                                      Retry-After; nothing stored; deleting and erasing stay allowed)
//
// On the OpenAI-compatible routes problems also carry OpenAI's "error"
// object, so the SDKs report the message; 4xx answers carry
// X-Should-Retry: false so the SDKs do not retry a conflict.
//
// # Auth and tenancy
//
// Bearer API keys are bound to tenants ([Auth]; keys are loaded from a file
// or an env var with [LoadKeys] / [KeysFromEnv] and held only as SHA-256
// hashes). A request only ever sees its tenant's threads: thread ids are
// looked up under the key's tenant, so another tenant's thread is simply
// not found. With auth disabled every request is tenant "default"
// ([Server.AuthEnabled] tells agentd whether it may bind a non-loopback
// address).
//
// # Server-sent events
//
// GET /v1/threads/{id}/events with Accept: text/event-stream streams the
// thread's durable events:
//
//	id: <stream sequence>
//	event: <event type>
//	data: <the event's JSON form with "seq" and "stored_at">
//
// Resume: a reader passes the last sequence it received as Last-Event-ID
// (browsers' EventSource does so on reconnect; it wins) or ?after=<seq>.
// The stream starts right after that sequence, so a reconnect gets every
// later event once, in order, with no gap and no duplicate; a frame cut
// off by a disconnect is never dispatched and is sent again. A sequence
// past the thread's version is a 400 naming the parameter. ?deltas=true
// adds live token deltas as "event: delta" frames without id (not
// resumable, best effort: at most 64 queued per stream, more are dropped).
// A ": heartbeat" comment goes out every Config.Heartbeat (15 s) so idle
// proxies keep the connection; a "retry: 1000" hint opens the stream.
// Headers for buffering proxies: Content-Type: text/event-stream,
// Cache-Control: no-cache, X-Accel-Buffering: no (nginx), Connection:
// keep-alive; every frame is flushed. The framing is written here (a few
// lines); no SSE library is used.
//
// Bounded memory. A stream reads the log lazily, one page at a time with
// batched direct gets, and reads the next page only when the previous one
// has been written to the socket; opening a stream reads its first page
// (and, to check a resume point, the thread's last message), never the
// whole thread. A page and the frame being written are
// at most Config.StreamBufferBytes (4 MiB; one event larger than that is
// still sent alone), taken from the server-wide Config.StreamTotalBytes
// budget (256 MiB, shared with the JSON events pages) before the page is
// read. Once a stream has caught up, a headers-only ordered consumer
// (at most 64 announcements pulled ahead, no event bodies) says when the
// thread has new events, and the stream reads them from the log the same
// way: nothing queues for a slow stream, on the shared NATS connection or
// in memory. The kernel send buffer of a stream's connection is set to
// a 32nd of StreamBufferBytes (64-256 KiB), so a client that does not
// read takes about one frame before its writes block.
//
// Dropping. Each write has a deadline (Config.WriteTimeout, 10 s, via
// http.ResponseController): a client that does not take a frame in time
// is dropped; a stream that cannot get room in StreamTotalBytes within
// WriteTimeout is ended. Both are logged and counted
// (Hooks.StreamDropped, reasons "write_timeout" and "memory_budget"); the
// client resumes with Last-Event-ID.
//
// # HTTP server limits
//
// [Server.HTTPServer] returns the http.Server to serve the API with:
// ReadHeaderTimeout (10 s), ReadTimeout (30 s: a body that has not arrived
// is answered 408), ResponseTimeout (60 s, http.Server.WriteTimeout) and
// IdleTimeout (60 s). Long routes (event streams, exports, chat
// completions) lift the read deadline once their body is read and
// replace the response deadline by a deadline per write (WriteTimeout),
// which heartbeats keep fresh on idle streams; every route lifts the read
// deadline once its body is read (Go's server would otherwise cancel the
// request's context at ReadTimeout). A request declaring a Content-Length
// above MaxBodyBytes is answered 413 before its body is read, so an
// Expect: 100-continue client is never told to send it. [Server.Listen]
// caps open connections at Config.MaxConns (4096, lowered to RLIMIT_NOFILE
// minus a quarter of it, at least 256) and those of one client address at
// Config.MaxConnsPerAddr (a quarter of MaxConns, at least 16). At
// MaxConns a new connection takes the slot of the keep-alive connection
// idle the longest (Hooks.ConnEvicted); beyond either cap otherwise it
// gets a 503 and is closed (Hooks.ConnRefused). So idle connections never
// keep a client out, one address cannot hold the service, and a flood of
// connections degrades to refusals, never to "too many open files".
//
// # OpenAI-compatible chat: sticky sessions
//
// Each request's conversation key is resolved with
// [client.ResolveConvKey], the Agenticore seed's 4 tiers: a header
// (X-Conversation-Id, X-LibreChat-Conversation-Id, X-OpenWebUI-Chat-Id),
// then body metadata.conversation_id or a UUID-shaped user, then
// sha256(system prompt + first user message)[:16] (off with
// Config.DisableConvHashFallback), else an ephemeral key. The key is scoped
// by agent (the "model" field, which must name a served agent) and user
// (X-User-Id or the body's user) and maps to a deterministic thread id, so
// two users never share a thread. The first turn creates the thread
// (agent = model, system prompt = the leading system message, owner = user,
// metadata conv_key / conv_tier / conv_source, and stateless=true for tier
// 4 — ephemeral conversations are recorded too) together with the
// request's messages, in one atomic append. The answer is the worker's:
// the handler watches the thread (with deltas when streaming) from before
// its append and collects the assistant messages whose ReplyTo is the
// answered user message until one has no tool calls. Response headers name
// the thread (X-Convlog-Thread), the key (X-Conversation-Id: send it back to
// stay on the thread) and the tier; the body's "convlog" member says the
// same and lists the tool calls the agent ran. One log line per request
// carries conv_key, tier, agent and stateless (Hooks.Chat for metrics).
//
// Non-streamed answers are a chat.completion whose message content is the
// steps' contents joined by a blank line, without tool calls (the agent ran
// them; they are not for the client to run). Streamed answers
// (stream: true) are chat.completion.chunk events: the role first, then
// content and reasoning_content deltas as the agent generates, and the
// tool calls the agent makes and runs itself in the extension member
// delta.convlog_tool_calls (index, id, type, function name, then argument
// pieces), never in delta.tool_calls, which is for calls the client must
// run: an SDK's accumulated message then holds no call for the client to
// run again, as in the non-streamed answer; then a
// finish_reason "stop" chunk, a usage chunk when stream_options.include_usage,
// then data: [DONE]. Whatever live deltas missed, the stored step supplies,
// so the streamed text is the stored answer.
//
// Client tools: a request's "tools" (OpenAI function tools the client runs
// itself) travel with the answered user message (events.ClientToolsKey);
// the agent's model may call them, its worker leaves those calls pending,
// and the answer ends with finish_reason "tool_calls" and the calls in
// message.tool_calls (delta.tool_calls when streaming). A step may call
// both kinds of tool: the agent runs its own calls, which are listed in the
// "convlog" member (streamed in delta.convlog_tool_calls), and the message
// holds only the client's. delta.tool_calls and delta.convlog_tool_calls
// each number their calls from 0, as the OpenAI SDKs' stream accumulators
// need; the stored assistant message keeps all the step's calls in the
// model's order, with the same ids. The client sends the results (role
// "tool") in its next request, which appends them paired with the calls,
// and the agent goes on. tool_choice "none" withholds the tools; other
// tool_choice values and parallel_tool_calls are accepted and not enforced.
// The offline agent calls a client tool NAME when the user says "use NAME".
// While calls are pending, a new user message is refused by the thread's
// default pending policy (reject): send the results first.
//
// # Divergence policy
//
// The chat service behind /v1/chat/completions is package agentd/chat
// (turn planning, history matching, answer collection; its doc has the
// divergence policy, which also accepts AgentKit's current-first order).
// This package parses the request into a chat.Turn,
// derives the turn's event ids from the Idempotency-Key, and maps the
// service's refusals to problems: 409 history-diverged (naming the first
// differing message, field "messages[i]" and index, and the thread's
// sequence it was compared with, with current_version for a fork), 410
// conversation-erased, 409 conversation-deleted, replies-off,
// agent-mismatch, superseded and interrupted, and 422 invalid-request.
// The thread is the record and is never rewritten or silently forked: the
// client should start a new conversation id (a new X-Conversation-Id), or
// fork the thread at the last common sequence (POST
// /v1/threads/{id}/fork {"at_seq": N}) and continue the fork through the
// REST and SSE API.
//
// # Lifecycle
//
// Shutdown order, for agentd:
//
//  1. [Server.Shutdown]: streams get a final "event: shutdown" frame and end,
//     chat requests waiting for an answer get 503 (the answer still lands),
//     and Shutdown waits for those handlers;
//  2. http.Server.Shutdown: stops accepting and drains the short requests;
//  3. the worker pool and the NATS connection.
package httpapi
