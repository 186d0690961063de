// Package retention applies retention policies to threads: per tenant (and
// overridable per thread), a thread whose last event is older than the
// policy's idle time is erased (client.Erase: its events purged, a
// thread.erased marker naming the policy left in its place, its snapshot,
// index entry and blobs removed). agentd serve runs an [Enforcer] when
// given --retention-file; `agentd retention plan` shows what it would do.
//
// The enforcer keeps no state of its own: each scan lists the tenant's
// threads from the index and erases the idle ones. An erased thread leaves
// the index, so it is never acted on twice, across restarts and with
// several enforcers (the second erase of a thread finds it erased and is
// skipped). Every action is the thread.erased event itself (with the
// reason "retention: ..."), visible to audit verify and in the log.
//
// A thread written to while it is being erased is erased with that write:
// the policy decided on the thread's last event time read just before.
package retention

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// MetadataKey is the thread metadata key that overrides its tenant's idle
// time: a duration ("720h") or "off" (the thread is kept).
const MetadataKey = "convlog.retention.erase_idle"

// Policy is what to do with a tenant's threads.
type Policy struct {
	// EraseIdle erases a thread whose last event is older than it
	// (positive; 0 = no erasure by age).
	EraseIdle time.Duration
}

// Config configures an [Enforcer]. The zero value of Interval means
// DefaultInterval.
type Config struct {
	// Tenants maps a tenant to its policy; other tenants are untouched.
	Tenants map[string]Policy
	// Interval between scans (default DefaultInterval).
	Interval time.Duration
	// DryRun reports the actions without taking them.
	DryRun bool
	// OnAction, when set, is called for every action taken (or, with
	// DryRun, planned), from Run's goroutine.
	OnAction func(Action)
	// Logger (nil = discard).
	Logger *slog.Logger
	// Now is the clock (nil = time.Now), for tests.
	Now func() time.Time
}

// DefaultInterval is the default time between scans.
const DefaultInterval = time.Minute

// Action is one thread a policy erased (or would erase).
type Action struct {
	Tenant string `json:"tenant"`
	Thread string `json:"thread"`
	// Idle is how long the thread had no event when it was decided.
	Idle time.Duration `json:"idle_ns"`
	// Limit is the policy's idle time that applied (the tenant's or the
	// thread's override).
	Limit time.Duration `json:"limit_ns"`
	// LastEventAt is the thread's last event time.
	LastEventAt time.Time `json:"last_event_at"`
	// Reason is the erasure marker's reason.
	Reason string `json:"reason"`
	// DryRun is true when nothing was done.
	DryRun bool `json:"dry_run,omitempty"`
	// RemovedEvents is what the erase removed (0 on a dry run).
	RemovedEvents uint64 `json:"removed_events,omitempty"`
}

// Enforcer applies Config's policies.
type Enforcer struct {
	c   *client.Client
	cfg Config
}

// New returns an enforcer. It returns an error naming every tenant or
// policy that is invalid.
func New(c *client.Client, cfg Config) (*Enforcer, error) {
	var errs []error
	for t, p := range cfg.Tenants {
		if err := events.ValidateTenant(t); err != nil {
			errs = append(errs, err)
		}
		if p.EraseIdle < 0 {
			errs = append(errs, fmt.Errorf("retention: tenant %s: erase_idle must not be negative, got %s", t, p.EraseIdle))
		}
	}
	if cfg.Interval < 0 {
		errs = append(errs, fmt.Errorf("retention: interval must not be negative, got %s", cfg.Interval))
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Enforcer{c: c, cfg: cfg}, errors.Join(errs...)
}

// Run scans at once and then every Interval until ctx ends (it returns
// nil then). A failed scan is logged and retried at the next interval: a
// retention policy never stops agentd.
func (e *Enforcer) Run(ctx context.Context) error {
	for {
		if _, err := e.Scan(ctx); err != nil && ctx.Err() == nil {
			e.cfg.Logger.Warn("retention scan failed; retrying at the next interval", "err", err, "interval", e.cfg.Interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(e.cfg.Interval):
		}
	}
}

// Scan applies every tenant's policy once and returns the actions, in
// tenant then thread order. A thread that another enforcer (or an
// operator) erased meanwhile is skipped. Errors stop the scan of that
// tenant and are returned joined; the actions taken before stay taken.
func (e *Enforcer) Scan(ctx context.Context) ([]Action, error) {
	var all []Action
	var errs []error
	for _, tenant := range slices.Sorted(maps.Keys(e.cfg.Tenants)) {
		acts, err := e.scanTenant(ctx, tenant, e.cfg.Tenants[tenant])
		all = append(all, acts...)
		if err != nil {
			errs = append(errs, fmt.Errorf("retention: tenant %s: %w", tenant, err))
		}
	}
	return all, errors.Join(errs...)
}

func (e *Enforcer) scanTenant(ctx context.Context, tenant string, p Policy) ([]Action, error) {
	now := e.cfg.Now()
	type candidate struct {
		thread string
		limit  time.Duration
	}
	var cands []candidate
	for s, err := range e.c.ListAll(ctx, tenant, client.ListOptions{IncludeDeleted: true}) {
		if err != nil {
			return nil, err
		}
		limit, err := limitFor(p, s.Metadata)
		if err != nil {
			e.cfg.Logger.Warn("retention: bad per-thread override; the tenant's policy applies", "tenant", tenant, "thread", s.Thread, "err", err)
		}
		if limit > 0 && now.Sub(s.UpdatedAt) > limit {
			cands = append(cands, candidate{s.Thread, limit})
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int { return strings.Compare(a.thread, b.thread) })
	var acts []Action
	for _, cd := range cands {
		// The index may lag: decide on the thread's own last event.
		th, err := e.c.Get(ctx, tenant, cd.thread, client.Consistent(), client.IncludeDeleted())
		if errors.Is(err, client.ErrThreadNotFound) {
			continue // erased meanwhile
		}
		if err != nil {
			return acts, err
		}
		idle := now.Sub(th.UpdatedAt)
		if idle <= cd.limit {
			continue
		}
		a := Action{Tenant: tenant, Thread: cd.thread, Idle: idle, Limit: cd.limit, LastEventAt: th.UpdatedAt, DryRun: e.cfg.DryRun,
			Reason: fmt.Sprintf("retention: no event for %s, over the policy's %s", idle.Round(time.Millisecond), cd.limit)}
		if !e.cfg.DryRun {
			rep, err := e.c.Erase(ctx, tenant, cd.thread, a.Reason)
			if errors.Is(err, client.ErrThreadNotFound) {
				continue // erased by someone else between the read and the erase
			}
			if err != nil {
				return acts, err
			}
			a.RemovedEvents = rep.RemovedEvents
			e.cfg.Logger.Info("retention: thread erased", "tenant", tenant, "thread", cd.thread, "idle", idle, "limit", cd.limit, "removed_events", rep.RemovedEvents)
		}
		acts = append(acts, a)
		if e.cfg.OnAction != nil {
			e.cfg.OnAction(a)
		}
	}
	return acts, nil
}

// limitFor is the idle limit of a thread: its metadata override, else the
// tenant's policy. A bad override is reported and the tenant's applies.
func limitFor(p Policy, md map[string]string) (time.Duration, error) {
	v, ok := md[MetadataKey]
	if !ok {
		return p.EraseIdle, nil
	}
	if v == "off" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return p.EraseIdle, fmt.Errorf("metadata %s = %q is not a positive duration or \"off\"", MetadataKey, v)
	}
	return d, nil
}

// File is the JSON of a retention file (agentd --retention-file):
//
//	{"interval": "1m", "tenants": {"acme": {"erase_idle": "720h"}}}
type File struct {
	Interval string `json:"interval,omitempty"`
	Tenants  map[string]struct {
		EraseIdle string `json:"erase_idle"`
	} `json:"tenants"`
}

// LoadFile reads a retention file into a Config (without Logger,
// OnAction, DryRun). Errors name the file and the field.
func LoadFile(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("retention: %w", err)
	}
	var f File
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Config{}, fmt.Errorf("retention: %s: %w", path, err)
	}
	cfg := Config{Tenants: map[string]Policy{}}
	var errs []error
	if f.Interval != "" {
		if cfg.Interval, err = time.ParseDuration(f.Interval); err != nil || cfg.Interval <= 0 {
			errs = append(errs, fmt.Errorf("retention: %s: interval %q is not a positive duration", path, f.Interval))
		}
	}
	for t, p := range f.Tenants {
		d, err := time.ParseDuration(p.EraseIdle)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("retention: %s: tenants.%s.erase_idle %q is not a positive duration", path, t, p.EraseIdle))
			continue
		}
		cfg.Tenants[t] = Policy{EraseIdle: d}
	}
	return cfg, errors.Join(errs...)
}
