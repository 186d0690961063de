package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
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
)

// Config configures a [Server]. Client is required; every other zero value
// means the default.
type Config struct {
	// Client appends and reads threads. Required.
	Client *client.Client
	// NC is the NATS connection; when set, GET /healthz reports 503 while it
	// is not connected. Optional.
	NC *nats.Conn
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
	// the write timeout (a client that disconnects is not counted).
	StreamDropped func(StreamDrop)
	// Chat is called once per chat completion.
	Chat func(ChatInfo)
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
	// Reason is "write_timeout".
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
		Heartbeat: DefaultHeartbeat, WriteTimeout: DefaultWriteTimeout, Producer: DefaultProducer}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	if c.AnswerTimeout == 0 {
		c.AnswerTimeout = d.AnswerTimeout
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = d.Heartbeat
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = d.WriteTimeout
	}
	if c.Producer == "" {
		c.Producer = d.Producer
	}
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
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("httpapi: MaxBodyBytes must be >= 0, got %d", c.MaxBodyBytes))
	}
	for name, d := range map[string]time.Duration{"AnswerTimeout": c.AnswerTimeout, "Heartbeat": c.Heartbeat, "WriteTimeout": c.WriteTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("httpapi: %s must be >= 0, got %s", name, d))
		}
	}
	if len(c.Producer) > events.DefaultLimits().MaxNameLen {
		errs = append(errs, fmt.Errorf("httpapi: Producer is longer than %d bytes", events.DefaultLimits().MaxNameLen))
	}
	return errors.Join(errs...)
}
