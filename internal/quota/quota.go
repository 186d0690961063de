// Package quota meters each tenant's use of the log and enforces its
// limits: stored bytes and events per second.
//
// # Metering
//
// A [Meter] (run by every agentd serve) consumes the event stream's
// headers only (a durable pull consumer "convlog-usage" shared by every
// meter of a deployment, each message to one of them) and keeps, in the
// KV bucket provision.Config.UsageBucket, one [Usage] record per tenant
// (key "<tenant>": stored bytes, events, the limits in force, the current
// one-second window of stored time and its event count) and the stored
// bytes of each thread (key "<tenant>.<thread>", decimal), so that an
// erasure (its thread.erased marker) gives the thread's bytes back.
// Updates are compare-and-set, so several meters add up; a meter that
// stops between its KV update and its acks counts those events again when
// they are redelivered (usage errs towards more, never less).
//
// The size of an event is its payload as stored (sealed), from the
// server's Nats-Msg-Size header: what the stream holds for the tenant,
// headers and per-message overhead aside. Redaction does not change it;
// erasure frees it.
//
// # Enforcement
//
// Writers check the record of the thread's tenant before an append
// ([Checker], used by package client: one KV get per tenant and CheckTTL):
// a tenant at or over its storage limit, or whose current second of
// stored time holds more events than its rate limit, gets an [*Error]
// (wrapping [ErrExceeded]) naming the limit and the usage; the HTTP API
// answers it with 429. Appends that only delete, erase or redact are never
// refused. agentd also removes the append permission of a tenant's
// scoped NATS users while the tenant is over its storage limit (package
// tenancy), so that a raw NATS publisher is held too. The rate limit is
// coarse: it acts once the meter has counted a second of stored time with
// more events than the limit (a fraction of a second behind the stream),
// until RateHold after that second ended, which is longer than a
// Checker's CheckTTL so that every writer sees it. Both limits are soft:
// writes go on for up to CheckTTL plus a metering round after a limit is
// reached: a tenant may pass a limit by what it writes in that time.
package quota

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/convlog/convlog/events"
)

// Limits are one tenant's limits. Zero means no limit.
type Limits struct {
	// StorageBytes caps the bytes of the tenant's stored events.
	StorageBytes int64 `json:"storage_bytes,omitempty"`
	// EventsPerSecond caps the events stored per second of stored time.
	EventsPerSecond int64 `json:"events_per_second,omitempty"`
}

// Config is the quota file (agentd serve --quota-file): limits for every
// tenant (Default) and per tenant (Tenants, replacing Default whole).
//
//	{"default": {"storage_bytes": 1073741824}, "tenants": {"acme": {"storage_bytes": 10485760, "events_per_second": 200}}}
type Config struct {
	Default Limits            `json:"default"`
	Tenants map[string]Limits `json:"tenants"`
}

// For returns tenant's limits.
func (c Config) For(tenant string) Limits {
	if l, ok := c.Tenants[tenant]; ok {
		return l
	}
	return c.Default
}

// LoadFile reads and validates a quota file. Errors name the file and
// the tenant or field that is wrong; unknown fields are refused.
func LoadFile(path string) (Config, error) {
	var c Config
	f, err := os.Open(path)
	if err != nil {
		return c, fmt.Errorf("quota file: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("quota file %s: %w", path, err)
	}
	check := func(where string, l Limits) error {
		if l.StorageBytes < 0 || l.EventsPerSecond < 0 {
			return fmt.Errorf("quota file %s: %s: limits must be >= 0 (0 = none)", path, where)
		}
		return nil
	}
	if err := check("default", c.Default); err != nil {
		return c, err
	}
	for t, l := range c.Tenants {
		if err := events.ValidateTenant(t); err != nil {
			return c, fmt.Errorf("quota file %s: tenant %q: %w", path, t, err)
		}
		if err := check("tenant "+t, l); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Usage is a tenant's record in the usage bucket (JSON at key "<tenant>").
type Usage struct {
	// Bytes and Events are what the tenant's stored events hold (erased
	// threads given back).
	Bytes  int64 `json:"bytes"`
	Events int64 `json:"events"`
	// Limits are the limits the meter last applied.
	Limits Limits `json:"limits"`
	// Window is the Unix second of stored time of the last events
	// counted, WindowEvents how many of the tenant's events it holds.
	Window       int64 `json:"window"`
	WindowEvents int64 `json:"window_events"`
	// RateLimitedUntil is when appends are accepted again after
	// WindowEvents went over Limits.EventsPerSecond.
	RateLimitedUntil time.Time `json:"rate_limited_until,omitzero"`
}

// RateHold is how long after the end of a second over its rate limit a
// tenant's appends are refused.
const RateHold = 2 * time.Second

// Kinds of limit in [Error].
const (
	KindStorage = "storage"
	KindRate    = "rate"
)

// ErrExceeded: an append was refused because its tenant is over a limit.
var ErrExceeded = errors.New("quota exceeded")

// Error says which limit of which tenant an append would exceed. It
// wraps [ErrExceeded].
type Error struct {
	Tenant string
	// Kind is KindStorage or KindRate.
	Kind string
	// Used and Limit: stored bytes, or events in the current second.
	Used, Limit int64
	// RetryAfter is when the rate limit lifts (KindRate).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Kind == KindRate {
		return fmt.Sprintf("quota exceeded: tenant %s stored %d events in one second, over its limit of %d events per second; retry after %s",
			e.Tenant, e.Used, e.Limit, e.RetryAfter.Round(time.Millisecond))
	}
	return fmt.Sprintf("quota exceeded: tenant %s stores %d bytes of events, at or over its limit of %d bytes; erase threads to free space or raise the limit",
		e.Tenant, e.Used, e.Limit)
}

// Unwrap returns ErrExceeded.
func (e *Error) Unwrap() error { return ErrExceeded }

// OverStorage reports whether u's stored bytes are at or over its
// storage limit (a limit of 0 is none): such a tenant may not append
// until it erases threads or the limit is raised, and agentd gives its
// NATS users read-only permissions.
func (u Usage) OverStorage() bool {
	return u.Limits.StorageBytes > 0 && u.Bytes >= u.Limits.StorageBytes
}

// Check returns the *Error of the first limit u is over at now, or nil.
func (u Usage) Check(tenant string, now time.Time) error {
	if u.OverStorage() {
		return &Error{Tenant: tenant, Kind: KindStorage, Used: u.Bytes, Limit: u.Limits.StorageBytes}
	}
	if now.Before(u.RateLimitedUntil) {
		return &Error{Tenant: tenant, Kind: KindRate, Used: u.WindowEvents, Limit: u.Limits.EventsPerSecond, RetryAfter: u.RateLimitedUntil.Sub(now)}
	}
	return nil
}

// Exempt reports whether events of type t are never refused: an append
// made only of them only deletes, erases or redacts.
func Exempt(t events.Type) bool {
	switch t {
	case events.TypeDeleted, events.TypeErased, events.TypeRedacted:
		return true
	}
	return false
}
