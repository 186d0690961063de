package httpapi

import (
	"cmp"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// Defaults of [Config].
const (
	// DefaultMaxBodyBytes is one event at the server's default max payload
	// (1 MiB) plus 64 KiB of headroom for JSON escaping and the envelope.
	DefaultMaxBodyBytes = 1<<20 + 64<<10
	// DefaultAnswerTimeout bounds how long /v1/chat/completions waits for an
	// agent's final answer.
	DefaultAnswerTimeout = 120 * time.Second
	// DefaultHeartbeat is the interval of SSE heartbeat comments.
	DefaultHeartbeat = 15 * time.Second
	// DefaultWriteTimeout is how long one write to a streaming client may
	// take before the client is dropped as too slow.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultProducer is recorded on events appended through the API.
	DefaultProducer = "agentd-http"
	// DefaultStreamBufferBytes is what one event stream may hold in memory:
	// log pages read ahead of its socket and the frame being written.
	DefaultStreamBufferBytes = 4 << 20
	// DefaultStreamTotalBytes is what all event streams of a server may
	// hold together.
	DefaultStreamTotalBytes = 256 << 20
	// DefaultReadHeaderTimeout bounds reading a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included.
	DefaultReadTimeout = 30 * time.Second
	// DefaultResponseTimeout bounds a non-streaming request from the end
	// of its headers to the end of its response.
	DefaultResponseTimeout = 60 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxConns caps open connections, further lowered to leave
	// headroom below the process's file descriptor limit (see
	// [Config.MaxConns]).
	DefaultMaxConns = 4096
	// DefaultMinConnsPerAddr is the least per-address cap the default of
	// [Config.MaxConnsPerAddr] gives (MaxConns when that is lower): a
	// browser opens up to 6 connections to a host, and each tab's event
	// stream holds one more.
	DefaultMinConnsPerAddr = 16
)

// Config configures a [Server]. Client is required; every other zero value
// means the default.
type Config struct {
	// Client appends and reads threads. Required.
	Client *client.Client
	// NC is the NATS connection; when set, GET /healthz reports 503 while it
	// is not connected. Optional.
	NC *nats.Conn
	// Storage, when set, reports the data store's state: a non-nil error
	// (its text says what and since when) while the store has no space
	// left. GET /healthz then answers 503 naming it, and a write that
	// fails for want of an answer (a timeout, 503 or 504) answers 507
	// storage-full instead. agentd sets it from its embedded server.
	Storage func() error
	// Logger receives one line per chat completion (conv_key, tier, agent,
	// stateless) and debug lines per request (nil = discard).
	Logger *slog.Logger
	// Agents are the agent names served: GET /v1/models lists them and the
	// chat "model" field must be one of them.
	Agents []string
	// Auth binds API keys to tenants, or is disabled.
	Auth Auth
	// MaxBodyBytes limits request bodies (413 beyond). Default
	// [DefaultMaxBodyBytes].
	MaxBodyBytes int64
	// MaxBlobBytes limits one blob (PUT /v1/threads/{id}/blobs/{name}):
	// 413 beyond. Default client.DefaultMaxBlobBytes (32 MiB).
	MaxBlobBytes int64
	// AuditKey is the public key of the audit checkpoints (package audit;
	// agentd's signing key): GET /v1/audit/key publishes it and GET
	// /v1/audit/verify and /v1/threads/{id}/audit verify the tenant's or
	// the thread's log against the checkpoints it signed. nil: those
	// answer 404 audit-off.
	AuditKey ed25519.PublicKey
	// MaxAudits caps the verifications (GET /v1/audit/verify, GET
	// /v1/threads/{id}/audit) running at once; one more is refused with
	// 429 audit-busy and Retry-After: a tenant's reads every checkpoint of
	// the stream, so a client repeating them cannot take every core. Default
	// DefaultMaxAudits.
	MaxAudits int
	// AnswerTimeout bounds the wait for an agent's answer in
	// /v1/chat/completions (504 beyond; the answer still lands in the
	// thread). Default [DefaultAnswerTimeout].
	AnswerTimeout time.Duration
	// DisableConvHashFallback turns off tier 3 (the content hash) of the
	// conversation key resolver: requests without a header or body key are
	// ephemeral. Agenticore's AGENTICORE_CONV_HASH_FALLBACK=false. The hash
	// fallback is on by default.
	DisableConvHashFallback bool
	// Heartbeat is the interval of SSE heartbeat comments. Default
	// [DefaultHeartbeat].
	Heartbeat time.Duration
	// WriteTimeout bounds each write to a streaming client; a client that
	// does not take the bytes in time is dropped. Default [DefaultWriteTimeout].
	WriteTimeout time.Duration
	// Producer is recorded on appended events that name none. Default
	// [DefaultProducer].
	Producer string
	// CORSOrigins are the browser origins ("https://app.example.com",
	// scheme, host and port, no path) allowed to call the API from another
	// origin (CORS, https://fetch.spec.whatwg.org/#http-cors-protocol):
	// their requests and preflights get the Access-Control-* headers, with
	// the request headers this API reads (Authorization, Idempotency-Key,
	// If-Match, Last-Event-ID, X-Conversation-Id, ...) allowed and its
	// response headers (ETag, X-Convlog-Thread, ...) exposed. Empty (the
	// default): no CORS headers, so browsers refuse every other origin's
	// request. "*" allows any origin (the API key still applies).
	CORSOrigins []string

	// StreamBufferBytes bounds the bytes one event stream holds in memory:
	// the page of the log it has read but its client has not yet taken,
	// and the frame being written. The log is read lazily, a page at a
	// time as the socket drains, never ahead of that. One event larger
	// than this alone is still sent (the stream then holds that event).
	// Default [DefaultStreamBufferBytes] (4 MiB).
	StreamBufferBytes int64
	// StreamTotalBytes bounds the bytes all event streams (and JSON events
	// pages, which answer 503 busy when it is full) hold together. A
	// stream that cannot get room for its next page within WriteTimeout is
	// ended and counted (Hooks.StreamDropped, reason "memory_budget"); its
	// client resumes with Last-Event-ID. Must be >= StreamBufferBytes.
	// Default [DefaultStreamTotalBytes] (256 MiB).
	StreamTotalBytes int64
	// ReadHeaderTimeout bounds reading a request's headers
	// (http.Server.ReadHeaderTimeout). Default [DefaultReadHeaderTimeout].
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included
	// (http.Server.ReadTimeout): a body that has not arrived by then is
	// answered 408 and the connection closed. Streams and chat
	// completions stop the clock once their body is read. Default
	// [DefaultReadTimeout].
	ReadTimeout time.Duration
	// ResponseTimeout bounds a non-streaming request from the end of its
	// headers to the end of its response (http.Server.WriteTimeout).
	// Long routes (event streams, exports, chat completions) are exempt:
	// each of their writes has its own WriteTimeout deadline instead, and
	// heartbeats keep idle streams writing. Default [DefaultResponseTimeout].
	ResponseTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request (http.Server.IdleTimeout). Default [DefaultIdleTimeout].
	IdleTimeout time.Duration
	// MaxConns caps the connections [Server.Listen]'s listener holds open.
	// At the cap a new connection takes the slot of the connection idle
	// the longest (a keep-alive connection between requests), which is
	// closed (counted with Hooks.ConnEvicted); when none is idle the new
	// connection is answered 503 and closed at once (counted with
	// Hooks.ConnRefused). So idle connections never keep a client out, and
	// a flood degrades to refusals instead of exhausting file descriptors.
	// Default: [DefaultMaxConns], lowered to the process's RLIMIT_NOFILE
	// minus a headroom of a quarter of it (at least 256) for NATS, the
	// data directory and the rest. An explicit value above that is a
	// Validate error.
	MaxConns int
	// MaxConnsPerAddr caps the connections one client address holds open
	// (an IPv6 client's /64): beyond it a new connection from that address
	// is answered 503 and closed at once (counted with Hooks.ConnRefused,
	// reason "max_conns_per_addr"), even when the server has room, so one
	// address cannot take the slots of everyone else with connections that
	// are busy (slow requests, streams). Default: a quarter of MaxConns,
	// at least [DefaultMinConnsPerAddr] (MaxConns when that is lower): 1024
	// at the default MaxConns, room for a NAT gateway of an office or a
	// front end relaying its users' streams, while it takes four addresses
	// to fill the server. -1 turns the cap off: for a reverse proxy that
	// every client comes through (all connections are the proxy's), or
	// exempt the proxy alone with MaxConnsPerAddrExempt. Values below -1
	// are a Validate error; values above MaxConns act as MaxConns.
	MaxConnsPerAddr int
	// MaxConnsPerAddrExempt are client addresses MaxConnsPerAddr does not
	// apply to, e.g. a trusted reverse proxy's (netip.MustParsePrefix(
	// "10.0.0.5/32")); they still count towards MaxConns. IPv4-mapped IPv6
	// clients match IPv4 prefixes. An invalid prefix is a Validate error.
	MaxConnsPerAddrExempt []netip.Prefix
	// Hooks are called for metrics (agentd wires Prometheus to them).
	Hooks Hooks
}

// Hooks let agentd count what the API does without this package importing a
// metrics library. Each hook may be nil; hooks are called synchronously
// from request goroutines and must be fast and safe for concurrent use.
type Hooks struct {
	// Request is called once per request when its handler returns.
	Request func(RequestInfo)
	// StreamDropped is called when a streaming client (SSE or a streamed
	// chat completion) is dropped because a write did not complete within
	// the write timeout, or (SSE) because StreamTotalBytes had no room for
	// its next page; StreamDrop.Reason says which. A client that
	// disconnects is not counted.
	StreamDropped func(StreamDrop)
	// Chat is called once per chat completion.
	Chat func(ChatInfo)
	// ConnRefused is called when [Server.Listen]'s listener refuses a
	// connection because MaxConns connections are open and none of them
	// is idle, or because its address holds MaxConnsPerAddr
	// (ConnRefusal.Reason says which). It is called from the accepting
	// goroutine, which waits for it: it must return quickly.
	ConnRefused func(ConnRefusal)
	// ConnEvicted is called when [Server.Listen]'s listener closes an idle
	// keep-alive connection to give its slot to a new connection because
	// MaxConns connections are open. It is called from the accepting
	// goroutine, which waits for it: it must return quickly.
	ConnEvicted func(ConnEviction)
}

// ConnRefusal describes a refused connection.
type ConnRefusal struct {
	// Remote is the client's address.
	Remote string
	// Open is the number of connections open: the cap that was reached
	// (MaxConns, or MaxConnsPerAddr for the client's address).
	Open int
	// Reason is "max_conns" (the server holds MaxConns connections, none
	// idle) or "max_conns_per_addr" (the client's address holds
	// MaxConnsPerAddr).
	Reason string
}

// ConnEviction describes an idle connection closed to make room for a new
// one.
type ConnEviction struct {
	// Remote is the closed connection's client address.
	Remote string
	// Idle is how long it had waited for its next request.
	Idle time.Duration
}

// RequestInfo describes one finished request.
type RequestInfo struct {
	// Route is the registered pattern, e.g. "GET /v1/threads/{id}".
	Route string
	// Tenant is the authenticated tenant ("" for public routes and
	// requests that failed authentication).
	Tenant string
	// Status is the response status; Took the handler's duration (for
	// streams, the stream's lifetime).
	Status int
	Took   time.Duration
}

// StreamDrop describes a dropped streaming client.
type StreamDrop struct {
	// Route, Tenant and Thread say which stream was dropped.
	Route  string
	Tenant string
	Thread string
	// Reason is "write_timeout" (a write did not complete within
	// Config.WriteTimeout) or "memory_budget" (no room within
	// Config.StreamTotalBytes for the stream's next page within
	// Config.WriteTimeout).
	Reason string
}

// ChatInfo describes one chat completion.
type ChatInfo struct {
	// Tenant, Thread and Agent say which conversation the request was
	// (Thread and Agent are "" when the request was rejected before its
	// conversation was resolved).
	Tenant, Thread, Agent string
	// Tier is the conversation key tier (1..4).
	Tier client.ConvTier
	// Stateless is true for tier-4 (ephemeral) conversations; Stream for
	// stream: true requests.
	Stateless bool
	Stream    bool
	// Outcome is "answered", "replayed", "diverged", "timeout", "error" or
	// "rejected" (a bad request).
	Outcome string
	// Status is the HTTP status; Took the request's duration.
	Status int
	Took   time.Duration
}

// DefaultConfig returns the defaults the zero values of Config stand for.
// Client, Agents and Auth are left for the caller.
func DefaultConfig() Config {
	return Config{MaxBodyBytes: DefaultMaxBodyBytes, AnswerTimeout: DefaultAnswerTimeout,
		Heartbeat: DefaultHeartbeat, WriteTimeout: DefaultWriteTimeout, Producer: DefaultProducer,
		StreamBufferBytes: DefaultStreamBufferBytes, StreamTotalBytes: DefaultStreamTotalBytes,
		ReadHeaderTimeout: DefaultReadHeaderTimeout, ReadTimeout: DefaultReadTimeout,
		ResponseTimeout: DefaultResponseTimeout, IdleTimeout: DefaultIdleTimeout}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.MaxBlobBytes = cmp.Or(c.MaxBlobBytes, client.DefaultMaxBlobBytes)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, d.MaxBodyBytes)
	c.AnswerTimeout = cmp.Or(c.AnswerTimeout, d.AnswerTimeout)
	c.Heartbeat = cmp.Or(c.Heartbeat, d.Heartbeat)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, d.WriteTimeout)
	c.Producer = cmp.Or(c.Producer, d.Producer)
	c.StreamBufferBytes = cmp.Or(c.StreamBufferBytes, d.StreamBufferBytes)
	c.StreamTotalBytes = cmp.Or(c.StreamTotalBytes, max(d.StreamTotalBytes, c.StreamBufferBytes))
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, d.ReadHeaderTimeout)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, d.ReadTimeout)
	c.ResponseTimeout = cmp.Or(c.ResponseTimeout, d.ResponseTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, d.IdleTimeout)
	if c.MaxConns == 0 {
		c.MaxConns, _ = maxConnsAllowed(0)
	}
	c.MaxConnsPerAddr = cmp.Or(c.MaxConnsPerAddr, max(c.MaxConns/4, min(c.MaxConns, DefaultMinConnsPerAddr)))
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("httpapi: Config.Client is required"))
	}
	seen := map[string]bool{}
	for _, a := range c.Agents {
		switch {
		case a == "":
			errs = append(errs, errors.New("httpapi: an agent name is empty"))
		case len(a) > client.MaxConvKeyLen:
			errs = append(errs, fmt.Errorf("httpapi: agent name %.32q... is longer than %d bytes", a, client.MaxConvKeyLen))
		case seen[a]:
			errs = append(errs, fmt.Errorf("httpapi: agent %q is listed twice", a))
		}
		seen[a] = true
	}
	if err := c.Auth.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxBlobBytes < 0 {
		errs = append(errs, fmt.Errorf("httpapi: MaxBlobBytes must be >= 0, got %d", c.MaxBlobBytes))
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("httpapi: MaxBodyBytes must be >= 0, got %d", c.MaxBodyBytes))
	}
	for name, d := range map[string]time.Duration{"AnswerTimeout": c.AnswerTimeout, "Heartbeat": c.Heartbeat, "WriteTimeout": c.WriteTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("httpapi: %s must be >= 0, got %s", name, d))
		}
	}
	if err := c.ValidateLimits(); err != nil {
		errs = append(errs, err)
	}
	if len(c.Producer) > events.DefaultLimits().MaxNameLen {
		errs = append(errs, fmt.Errorf("httpapi: Producer is longer than %d bytes", events.DefaultLimits().MaxNameLen))
	}
	return errors.Join(errs...)
}

// ValidateLimits reports every problem with the memory, timeout and
// connection limits and the CORS origins at once (Validate includes it; it
// needs no Client, so agentd serve --check can run it before connecting):
// negative values (MaxConnsPerAddr: below -1), a StreamTotalBytes below
// StreamBufferBytes, a MaxConns at or above what the process's file
// descriptor limit leaves room for, an invalid MaxConnsPerAddrExempt
// prefix, and a CORSOrigins entry that is not an origin.
func (c Config) ValidateLimits() error {
	var errs []error
	for _, o := range c.CORSOrigins {
		if err := validOrigin(o); err != nil {
			errs = append(errs, err)
		}
	}
	if c.MaxAudits < 0 {
		errs = append(errs, fmt.Errorf("httpapi: MaxAudits must be >= 0, got %d", c.MaxAudits))
	}
	for name, n := range map[string]int64{"StreamBufferBytes": c.StreamBufferBytes, "StreamTotalBytes": c.StreamTotalBytes} {
		if n < 0 {
			errs = append(errs, fmt.Errorf("httpapi: %s must be >= 0, got %d", name, n))
		}
	}
	if c.StreamBufferBytes > 0 && c.StreamTotalBytes > 0 && c.StreamTotalBytes < c.StreamBufferBytes {
		errs = append(errs, fmt.Errorf("httpapi: StreamTotalBytes (%d) must be >= StreamBufferBytes (%d)", c.StreamTotalBytes, c.StreamBufferBytes))
	}
	for name, d := range map[string]time.Duration{"ReadHeaderTimeout": c.ReadHeaderTimeout, "ReadTimeout": c.ReadTimeout,
		"ResponseTimeout": c.ResponseTimeout, "IdleTimeout": c.IdleTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("httpapi: %s must be >= 0, got %s", name, d))
		}
	}
	if c.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("httpapi: MaxConns must be >= 0, got %d", c.MaxConns))
	} else if _, err := maxConnsAllowed(c.MaxConns); err != nil {
		errs = append(errs, err)
	}
	if c.MaxConnsPerAddr < -1 {
		errs = append(errs, fmt.Errorf("httpapi: MaxConnsPerAddr must be >= -1 (-1: no per-address cap), got %d", c.MaxConnsPerAddr))
	}
	for i, p := range c.MaxConnsPerAddrExempt {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("httpapi: MaxConnsPerAddrExempt[%d] is not a valid prefix", i))
		}
	}
	return errors.Join(errs...)
}

// validOrigin checks one CORSOrigins entry: "*", or scheme://host[:port]
// with scheme http or https and nothing after the host (an origin as
// browsers send it in the Origin header).
func validOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("httpapi: CORS origin %q is not an origin: want scheme://host[:port] with scheme http or https, e.g. https://app.example.com", o)
	}
	return nil
}
