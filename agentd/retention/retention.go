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
//
// A policy may instead keep only a thread's recent history (KeepEvents):
// the messages older than that are replaced, in the projection, by a
// thread.compacted summary saying how many were removed and why, and
// their content is made unreadable for good (client.RedactThrough: every
// event with content up to the cut, in one key rotation, recorded by one
// event.redacted naming the range). The thread's attributes and key-value
// state stay. The summary's event id is derived from the thread and the
// cut, and a thread whose first message is that summary with no
// redaction recorded up to it gets the redaction: an enforcer stopped
// between the two steps finishes the job at its next scan, and nothing is
// done twice.
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

	"github.com/google/uuid"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// MetadataKey is the thread metadata key that overrides its tenant's idle
// time: a duration ("720h") or "off" (the thread is kept).
const MetadataKey = "convlog.retention.erase_idle"

// KeepMetadataKey is the thread metadata key that overrides its tenant's
// KeepEvents: a duration or "off".
const KeepMetadataKey = "convlog.retention.keep_events"

// Policy is what to do with a tenant's threads.
type Policy struct {
	// EraseIdle erases a thread whose last event is older than it
	// (positive; 0 = no erasure by age).
	EraseIdle time.Duration
	// KeepEvents keeps only the messages of the last KeepEvents (by their
	// event time): older ones are compacted into a summary and redacted
	// (0 = keep everything).
	KeepEvents time.Duration
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
	// Reason is the erasure marker's (or the redaction's) reason.
	Reason string `json:"reason"`
	// Kind is "erase" (EraseIdle) or "keep" (KeepEvents: the messages up
	// to UpToSeq were compacted and Redacted events redacted).
	Kind     string `json:"kind"`
	UpToSeq  uint64 `json:"up_to_seq,omitempty"`
	Redacted int    `json:"redacted,omitempty"`
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
		if p.KeepEvents < 0 {
			errs = append(errs, fmt.Errorf("retention: tenant %s: keep_events must not be negative, got %s", t, p.KeepEvents))
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
	var cands, keeps []candidate
	for s, err := range e.c.ListAll(ctx, tenant, client.ListOptions{IncludeDeleted: true}) {
		if err != nil {
			return nil, err
		}
		limit, err := limitFor(p.EraseIdle, MetadataKey, s.Metadata)
		if err != nil {
			e.cfg.Logger.Warn("retention: bad per-thread override; the tenant's policy applies", "tenant", tenant, "thread", s.Thread, "err", err)
		}
		if limit > 0 && now.Sub(s.UpdatedAt) > limit {
			cands = append(cands, candidate{s.Thread, limit})
			continue
		}
		keep, err := limitFor(p.KeepEvents, KeepMetadataKey, s.Metadata)
		if err != nil {
			e.cfg.Logger.Warn("retention: bad per-thread override; the tenant's policy applies", "tenant", tenant, "thread", s.Thread, "err", err)
		}
		if keep > 0 && now.Sub(s.CreatedAt) > keep {
			keeps = append(keeps, candidate{s.Thread, keep})
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int { return strings.Compare(a.thread, b.thread) })
	slices.SortFunc(keeps, func(a, b candidate) int { return strings.Compare(a.thread, b.thread) })
	acts, err := e.eraseIdle(ctx, tenant, now, cands)
	if err != nil {
		return acts, err
	}
	for _, cd := range keeps {
		a, ok, err := e.keepRecent(ctx, tenant, cd.thread, cd.limit, now)
		if err != nil {
			return acts, err
		}
		if ok {
			acts = append(acts, a)
			if e.cfg.OnAction != nil {
				e.cfg.OnAction(a)
			}
		}
	}
	return acts, nil
}

// candidate is a thread a scan looks at, with the limit that applies.
type candidate struct {
	thread string
	limit  time.Duration
}

// eraseIdle erases the candidates still idle when read from their logs.
func (e *Enforcer) eraseIdle(ctx context.Context, tenant string, now time.Time, cands []candidate) ([]Action, error) {
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
		a := Action{Tenant: tenant, Thread: cd.thread, Kind: "erase", Idle: idle, Limit: cd.limit, LastEventAt: th.UpdatedAt, DryRun: e.cfg.DryRun,
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

// limitFor is a thread's limit: its metadata override at key, else the
// tenant's policy def. A bad override is reported and the tenant's
// applies.
func limitFor(def time.Duration, key string, md map[string]string) (time.Duration, error) {
	v, ok := md[key]
	if !ok {
		return def, nil
	}
	if v == "off" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return def, fmt.Errorf("metadata %s = %q is not a positive duration or \"off\"", key, v)
	}
	return d, nil
}

// summaryID is the event id of the retention summary of thread at cut:
// the same for every enforcer and scan, so that the summary is appended
// once.
func summaryID(tenant, thread string, cut uint64) string {
	return uuid.NewSHA1(summaryNamespace, []byte(fmt.Sprintf("%s\x00%s\x00%d", tenant, thread, cut))).String()
}

var summaryNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/convlog/convlog/retention-summary"))

// keepRecent applies KeepEvents to one thread: it finishes a cut whose
// summary is there but whose redaction is not recorded, or makes a new
// cut after the last message older than keep (never between a tool call
// and its result, nor before a pending call). ok is false when there is
// nothing to do.
func (e *Enforcer) keepRecent(ctx context.Context, tenant, thread string, keep time.Duration, now time.Time) (Action, bool, error) {
	th, err := e.c.Get(ctx, tenant, thread, client.Consistent())
	if errors.Is(err, client.ErrThreadNotFound) {
		return Action{}, false, nil
	}
	if err != nil {
		return Action{}, false, err
	}
	done := redactedUpTo(th)
	a := Action{Tenant: tenant, Thread: thread, Kind: "keep", Limit: keep, LastEventAt: th.UpdatedAt, DryRun: e.cfg.DryRun,
		Reason: fmt.Sprintf("retention: messages older than %s", keep)}
	msgs := th.Messages
	start := 0
	if len(msgs) > 0 && msgs[0].Synthetic && msgs[0].EventID == summaryID(tenant, thread, msgs[0].Seq) {
		if msgs[0].Seq > done {
			// The summary is there, the redaction not recorded: finish.
			a.UpToSeq = msgs[0].Seq
			return a, true, e.redact(ctx, &a)
		}
		start = 1
	}
	cut := cutIndex(msgs[start:], now, keep, firstPending(th))
	if cut >= 0 {
		cut += start
	}
	if cut < 0 || msgs[cut].Seq <= done {
		return Action{}, false, nil
	}
	a.UpToSeq = msgs[cut].Seq
	if e.cfg.DryRun {
		return a, true, nil
	}
	removed := cut + 1 - start // an earlier summary is replaced, not counted
	summary := events.Event{ID: summaryID(tenant, thread, a.UpToSeq), Payload: events.Compaction{UpToSeq: a.UpToSeq,
		Summary: events.Text(fmt.Sprintf("[%d earlier messages were removed by the retention policy: older than %s]", removed+th.Base, keep))}}
	if _, err := e.c.Append(ctx, tenant, thread, []events.Event{summary}, client.AnyVersion()); err != nil {
		return a, false, fmt.Errorf("thread %s: summary: %w", thread, err)
	}
	return a, true, e.redact(ctx, &a)
}

// redactedUpTo is the highest sequence th's redactions reach, 0 for none.
func redactedUpTo(th *client.Thread) uint64 {
	var done uint64
	for _, r := range th.Redactions {
		done = max(done, r.UpToSeq)
	}
	return done
}

// firstPending is the sequence of th's earliest pending tool call, 0 for
// none.
func firstPending(th *client.Thread) uint64 {
	pending := uint64(0)
	for _, pc := range th.Pending {
		if pending == 0 || pc.Seq < pending {
			pending = pc.Seq
		}
	}
	return pending
}

// cutIndex is the index in msgs of the last message a cut may end at, or
// -1 for none. The cut covers a run from the start of messages older than
// keep at now and before pending (the earliest pending call's sequence,
// 0 for none), and never ends at a message a tool result follows (it
// would separate the result from its call).
func cutIndex(msgs []events.Message, now time.Time, keep time.Duration, pending uint64) int {
	cut := -1
	for i, m := range msgs {
		if now.Sub(m.Time) <= keep || (pending != 0 && m.Seq >= pending) {
			break
		}
		if i+1 < len(msgs) && msgs[i+1].Role == events.RoleTool {
			continue // would separate a tool result from its call
		}
		cut = i
	}
	return cut
}

// redact redacts a.Thread up to a.UpToSeq (client.RedactThrough).
func (e *Enforcer) redact(ctx context.Context, a *Action) error {
	if e.cfg.DryRun {
		return nil
	}
	rep, err := e.c.RedactThrough(ctx, a.Tenant, a.Thread, a.UpToSeq, a.Reason)
	if err != nil {
		return fmt.Errorf("thread %s: redact up to %d: %w", a.Thread, a.UpToSeq, err)
	}
	a.Redacted = rep.Redacted
	e.cfg.Logger.Info("retention: older messages compacted and redacted", "tenant", a.Tenant, "thread", a.Thread, "up_to_seq", a.UpToSeq, "redacted", rep.Redacted)
	return nil
}

// File is the JSON of a retention file (agentd --retention-file):
//
//	{"interval": "1m", "tenants": {"acme": {"erase_idle": "720h", "keep_events": "168h"}}}
//
// Each tenant needs erase_idle, keep_events or both.
type File struct {
	Interval string `json:"interval,omitempty"`
	Tenants  map[string]struct {
		EraseIdle  string `json:"erase_idle"`
		KeepEvents string `json:"keep_events"`
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
		var pol Policy
		parse := func(field, v string, into *time.Duration) {
			if v == "" {
				return
			}
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("retention: %s: tenants.%s.%s %q is not a positive duration", path, t, field, v))
				return
			}
			*into = d
		}
		parse("erase_idle", p.EraseIdle, &pol.EraseIdle)
		parse("keep_events", p.KeepEvents, &pol.KeepEvents)
		if p.EraseIdle == "" && p.KeepEvents == "" {
			errs = append(errs, fmt.Errorf("retention: %s: tenants.%s needs erase_idle or keep_events", path, t))
			continue
		}
		cfg.Tenants[t] = pol
	}
	return cfg, errors.Join(errs...)
}
