package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/lru"
	"github.com/convlog/convlog/internal/provision"
)

// DefaultDurable is the meters' shared consumer.
const DefaultDurable = "convlog-usage"

// fetchWait bounds how long a metering round waits for a full batch: the
// meter's delay behind the stream when events trickle in.
const fetchWait = 250 * time.Millisecond

// MeterConfig configures a [Meter].
type MeterConfig struct {
	// Resources names the stream and the usage bucket (defaults filled in).
	Resources provision.Config
	// Limits are the limits written into each tenant's record.
	Limits Config
	// Durable is the consumer's name. Default DefaultDurable.
	Durable string
	// Batch is the most messages handled per KV update round. Default
	// 1,000.
	Batch int
	// Logger gets a line per failed round (retried). Default: discard.
	Logger *slog.Logger
	// OnUsage, when set, is called with each tenant's record after the
	// meter updated it (the metric hook), from Run's goroutine.
	OnUsage func(tenant string, u Usage)
	// ThreadCache bounds the threads whose byte count (and KV revision)
	// the meter remembers, saving a read per update. Default 65,536.
	ThreadCache int
}

// Meter counts tenants' stored bytes and events (package doc). Create one
// with [NewMeter] and call Run.
type Meter struct {
	cfg      MeterConfig
	cons     jetstream.Consumer
	kv       jetstream.KeyValue
	subjects events.Subjects
	threads  *lru.Cache[string, threadCount]
}

// threadCount is a thread's record as last read or written.
type threadCount struct {
	bytes int64
	rev   uint64
}

// NewMeter creates or binds the meters' consumer (headers only, every
// thread subject, explicit acks) and the usage bucket's handle. Errors
// name the resource that is missing.
func NewMeter(ctx context.Context, js jetstream.JetStream, cfg MeterConfig) (*Meter, error) {
	cfg.Resources = cfg.Resources.WithDefaults()
	if cfg.Durable == "" {
		cfg.Durable = DefaultDurable
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.ThreadCache <= 0 {
		cfg.ThreadCache = 65536
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	subjects := events.Subjects{Prefix: cfg.Resources.SubjectPrefix}
	cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Resources.Stream, jetstream.ConsumerConfig{
		Durable: cfg.Durable, Description: "convlog usage meters (package quota): headers only",
		// No filter subject: apply skips the audit checkpoints, and an
		// unfiltered consumer is nats-server's cheapest next-message path
		// (client.DurableConfig.AllSubjects says why).
		HeadersOnly: true, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxAckPending: 4 * cfg.Batch, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("quota: consumer %s: %w", cfg.Durable, err)
	}
	kv, err := js.KeyValue(ctx, cfg.Resources.UsageBucket)
	if err != nil {
		return nil, fmt.Errorf("quota: KV bucket %s: %w", cfg.Resources.UsageBucket, err)
	}
	return &Meter{cfg: cfg, cons: cons, kv: kv, subjects: subjects, threads: lru.New[string, threadCount](cfg.ThreadCache, 0)}, nil
}

// Run writes the configured limits into the records of the tenants the
// quota file names, then meters until ctx ends (it returns nil then). A
// failed round is logged and retried (its messages are redelivered).
func (m *Meter) Run(ctx context.Context) error {
	for t := range m.cfg.Limits.Tenants {
		if err := m.updateTenant(ctx, t, tenantTally{}); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("quota: write limits", "tenant", t, "err", err)
		}
	}
	for ctx.Err() == nil {
		batch, err := m.cons.Fetch(m.cfg.Batch, jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			if ctx.Err() == nil {
				m.cfg.Logger.Warn("quota: fetch", "err", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		var msgs []jetstream.Msg
		for msg := range batch.Messages() {
			msgs = append(msgs, msg)
		}
		if len(msgs) == 0 {
			continue
		}
		if err := m.apply(ctx, msgs); err != nil {
			if ctx.Err() == nil {
				m.cfg.Logger.Warn("quota: update usage (the events are metered again)", "events", len(msgs), "err", err)
				for _, msg := range msgs {
					_ = msg.Nak()
				}
				sleep(ctx, time.Second)
			}
			continue
		}
		for _, msg := range msgs {
			_ = msg.Ack()
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// tenantTally is what one round adds to a tenant's record.
type tenantTally struct {
	bytes, events int64
	// windows counts events per Unix second of stored time.
	windows map[int64]int64
	// threads are the byte deltas per thread; reset marks threads whose
	// count starts again from their delta (an erasure marker).
	threads map[string]int64
	reset   map[string]bool
}

// apply counts msgs and updates the records they touch.
func (m *Meter) apply(ctx context.Context, msgs []jetstream.Msg) error {
	tallies := map[string]*tenantTally{}
	for _, msg := range msgs {
		tenant, thread, err := m.subjects.Parse(msg.Subject())
		if err != nil {
			continue // not a thread subject: an audit checkpoint
		}
		size, _ := strconv.ParseInt(msg.Headers().Get("Nats-Msg-Size"), 10, 64)
		t := tallies[tenant]
		if t == nil {
			t = &tenantTally{windows: map[int64]int64{}, threads: map[string]int64{}, reset: map[string]bool{}}
			tallies[tenant] = t
		}
		if msg.Headers().Get(events.HeaderType) == string(events.TypeErased) {
			// The erasure purged the thread before its marker: what this
			// round counted of it is gone, and so is what was recorded
			// (updateThread subtracts it).
			t.bytes -= t.threads[thread]
			t.threads[thread] = 0
			t.reset[thread] = true
		}
		t.bytes += size
		t.events++
		t.threads[thread] += size
		if md, err := msg.Metadata(); err == nil {
			t.windows[md.Timestamp.Unix()]++
		}
	}
	for tenant, t := range tallies {
		for thread, delta := range t.threads {
			freed, err := m.updateThread(ctx, tenant+"."+thread, delta, t.reset[thread])
			if err != nil {
				return err
			}
			t.bytes -= freed
		}
		if err := m.updateTenant(ctx, tenant, *t); err != nil {
			return err
		}
	}
	return nil
}

// updateThread adds delta to a thread's byte count, or with reset sets it
// to delta and returns the count it replaced (the bytes an erasure freed).
func (m *Meter) updateThread(ctx context.Context, key string, delta int64, reset bool) (int64, error) {
	for attempt := 0; ; attempt++ {
		cur, ok := m.threads.Get(key)
		if !ok || attempt > 0 {
			e, err := m.kv.Get(ctx, key)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				cur = threadCount{}
			case err != nil:
				return 0, fmt.Errorf("quota: read %s: %w", key, err)
			default:
				n, _ := strconv.ParseInt(string(e.Value()), 10, 64)
				cur = threadCount{bytes: n, rev: e.Revision()}
			}
		}
		next, freed := cur.bytes+delta, int64(0)
		if reset {
			next, freed = delta, cur.bytes
		}
		val := []byte(strconv.FormatInt(next, 10))
		var rev uint64
		var err error
		if cur.rev == 0 {
			rev, err = m.kv.Create(ctx, key, val)
		} else {
			rev, err = m.kv.Update(ctx, key, val, cur.rev)
		}
		if err != nil {
			if attempt < 20 && (errors.Is(err, jetstream.ErrKeyExists) || isWrongLast(err)) {
				continue // another meter wrote it: read again
			}
			return 0, fmt.Errorf("quota: write %s: %w", key, err)
		}
		m.threads.Put(key, threadCount{bytes: next, rev: rev}, 1)
		return freed, nil
	}
}

// isWrongLast reports a compare-and-set that lost (JetStream 10071).
func isWrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// updateTenant adds t to tenant's record (compare-and-set, retried), with
// the limits of the configuration, and calls OnUsage.
func (m *Meter) updateTenant(ctx context.Context, tenant string, t tenantTally) error {
	for attempt := 0; ; attempt++ {
		var u Usage
		var rev uint64
		e, err := m.kv.Get(ctx, tenant)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("quota: read usage of %s: %w", tenant, err)
		default:
			if err := json.Unmarshal(e.Value(), &u); err != nil {
				m.cfg.Logger.Warn("quota: unreadable usage record; starting it again", "tenant", tenant, "err", err)
				u = Usage{}
			}
			rev = e.Revision()
		}
		u.Bytes = max(u.Bytes+t.bytes, 0)
		u.Events += t.events
		u.Limits = m.cfg.Limits.For(tenant)
		for _, sec := range slices.Sorted(maps.Keys(t.windows)) {
			switch {
			case sec > u.Window:
				u.Window, u.WindowEvents = sec, t.windows[sec]
			case sec == u.Window:
				u.WindowEvents += t.windows[sec]
			}
		}
		if l := u.Limits.EventsPerSecond; l > 0 && u.WindowEvents > l {
			// Held from the end of the window, not from when it was
			// counted: a meter behind the stream does not hold a tenant
			// for a burst long past.
			if until := time.Unix(u.Window+1, 0).Add(RateHold).UTC(); until.After(u.RateLimitedUntil) {
				u.RateLimitedUntil = until
			}
		}
		b, err := json.Marshal(u)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = m.kv.Create(ctx, tenant, b)
		} else {
			_, err = m.kv.Update(ctx, tenant, b, rev)
		}
		if err != nil {
			if attempt < 20 && (errors.Is(err, jetstream.ErrKeyExists) || isWrongLast(err)) {
				continue
			}
			return fmt.Errorf("quota: write usage of %s: %w", tenant, err)
		}
		if m.cfg.OnUsage != nil {
			m.cfg.OnUsage(tenant, u)
		}
		return nil
	}
}
