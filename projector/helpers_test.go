package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
	"github.com/convlog/convlog/threadkey"
)

// env is a provisioned embedded server with the snapshot reader.
type env struct {
	srv   *natstest.Server
	res   provision.Resources
	js    jetstream.JetStream
	snaps *snapstore.Store
	keys  *threadkey.Keys
}

func newEnv(t testing.TB) *env {
	t.Helper()
	srv, res := natstest.Provisioned(t, provision.Config{})
	return envOf(t, srv, res)
}

// envOf is the env of a provisioned server.
func envOf(t testing.TB, srv *natstest.Server, res provision.Resources) *env {
	t.Helper()
	keys, err := threadkey.New(context.Background(), srv.JS, res.Keys, 0)
	require.NoError(t, err)
	e := &env{srv: srv, res: res, js: srv.JS, keys: keys}
	e.snaps = e.store(res.Snapshots, snapstore.Options{})
	return e
}

// store is a snapshot reader of kv configured by opts that opens sealed
// values with the thread data keys, as client/ does.
func (e *env) store(kv jetstream.KeyValue, opts snapstore.Options) *snapstore.Store {
	opts.Sealer = e.keys
	return snapstore.NewWith(kv, opts)
}

// summary decodes an index entry, opening it with the thread's key.
func (e *env) summary(t testing.TB, tenant, thread string, entry jetstream.KeyValueEntry) (snapstore.Summary, error) {
	t.Helper()
	plain, err := e.keys.OpenValue(context.Background(), tenant, thread, entry.Key(), entry.Value())
	if err != nil {
		return snapstore.Summary{}, err
	}
	return snapstore.UnmarshalSummary(plain)
}

// start runs a projector until the test ends (or stop is called) and
// waits until it is ready.
func (e *env) start(t testing.TB, cfg projector.Config) (stop func()) {
	t.Helper()
	_, stop = e.startProjector(t, cfg)
	return stop
}

// startProjector is start, returning the projector too; stop fails t if
// Run returned an error.
func (e *env) startProjector(t testing.TB, cfg projector.Config) (p *projector.Projector, stop func()) {
	t.Helper()
	rp := clienttest.RunProjector(t, e.js, cfg)
	stop = func() { require.NoError(t, rp.Stop()) }
	t.Cleanup(stop)
	return rp.Projector, stop
}

// publish appends ev (marshalled, with convlog's headers) and returns its
// sequence.
func (e *env) publish(t testing.TB, ev events.Event) uint64 {
	t.Helper()
	b, err := events.Marshal(ev)
	require.NoError(t, err)
	return e.publishRaw(t, fmt.Sprintf("conv.%s.%s", ev.Tenant, ev.Thread), b, events.Headers(ev))
}

func (e *env) publishRaw(t testing.TB, subject string, data []byte, hdr map[string]string, opts ...jetstream.PublishOpt) uint64 {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = data
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	ack, err := e.js.PublishMsg(context.Background(), m, opts...)
	require.NoError(t, err)
	return ack.Sequence
}

// publishAfter appends ev as a client/ writer does: with the version it
// expects the thread to have (optimistic concurrency).
func (e *env) publishAfter(t testing.TB, ev events.Event, version uint64) uint64 {
	t.Helper()
	b, err := events.Marshal(ev)
	require.NoError(t, err)
	return e.publishRaw(t, fmt.Sprintf("conv.%s.%s", ev.Tenant, ev.Thread), b, events.Headers(ev),
		jetstream.WithExpectLastSequencePerSubject(version))
}

// fold folds a thread from the stream in memory, from its first event.
func (e *env) fold(t testing.TB, tenant, thread string) *fold.State {
	t.Helper()
	return e.foldMore(t, fold.NewState(tenant, thread))
}

// foldMore folds the events after s.Version into s (a copy) and returns it.
func (e *env) foldMore(t testing.TB, s *fold.State) *fold.State {
	t.Helper()
	s = s.Clone()
	from := s.Version + 1
	for {
		it, err := jetstreamext.GetBatch(context.Background(), e.js, "CONVLOG", 1000,
			jetstreamext.GetBatchSeq(from), jetstreamext.GetBatchSubject("conv."+s.Tenant+"."+s.Thread))
		require.NoError(t, err)
		n := 0
		for m, err := range it {
			if errors.Is(err, jetstreamext.ErrNoMessages) {
				break
			}
			require.NoError(t, err)
			_ = fold.ApplyBytes(s, m.Sequence, m.Time, m.Data)
			from = m.Sequence + 1
			n++
		}
		if n == 0 {
			return s
		}
	}
}

// waitVersion polls the head until it reaches version v.
func (e *env) waitVersion(t testing.TB, tenant, thread string, v uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h, err := e.snaps.LoadHead(context.Background(), tenant, thread)
		if err == nil && h.State.Version >= v {
			return
		}
		if time.Now().After(deadline) {
			got := uint64(0)
			if h != nil {
				got = h.State.Version
			}
			t.Fatalf("thread %s/%s: version %d not reached within 30s (at %d, err %v)", tenant, thread, v, got, err)
		}
		time.Sleep(2 * time.Millisecond) // polling interval, not a wait for a condition
	}
}

// requireSameState fails unless a and b are the same projection (nil and
// empty collections alike; a JSON diff on mismatch).
func requireSameState(t testing.TB, want, got *fold.State, msgAndArgs ...any) {
	t.Helper()
	norm := func(s *fold.State) *fold.State {
		c := *s
		if c.Messages == nil {
			c.Messages = []events.Message{}
		}
		if len(c.Pending) == 0 {
			c.Pending = nil
		}
		if len(c.Rejections) == 0 {
			c.Rejections = nil
		}
		if len(c.KV) == 0 {
			c.KV = nil
		}
		if len(c.Metadata) == 0 {
			c.Metadata = nil
		}
		if len(c.AgentTurns) == 0 {
			c.AgentTurns = nil
		}
		return &c
	}
	want, got = norm(want), norm(got)
	if reflect.DeepEqual(want, got) {
		return
	}
	wb, err := json.Marshal(want)
	require.NoError(t, err)
	gb, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(wb), string(gb), msgAndArgs...)
}

// ev builds an event on tenant/thread at a fixed clock.
type clock struct{ t time.Time }

func (c *clock) ev(tenant, thread string, p events.Payload) events.Event {
	c.t = c.t.Add(time.Millisecond)
	e := events.New(tenant, thread, "test", p)
	e.Time = c.t
	return e
}

// publishAsync appends many events without waiting for each ack, in order
// per subject, and returns their sequences.
func (e *env) publishAsync(t testing.TB, evs []events.Event) []uint64 {
	t.Helper()
	futs := make([]jetstream.PubAckFuture, len(evs))
	for i, ev := range evs {
		var err error
		futs[i], err = e.js.PublishMsgAsync(clienttest.Msg(t, fmt.Sprintf("conv.%s.%s", ev.Tenant, ev.Thread), ev))
		require.NoError(t, err)
		if i%3000 == 2999 {
			select {
			case <-e.js.PublishAsyncComplete():
			case <-time.After(30 * time.Second):
				t.Fatal("async publishes not acked within 30s")
			}
		}
	}
	seqs := make([]uint64, len(evs))
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			seqs[i] = ack.Sequence
		case err := <-f.Err():
			t.Fatalf("publish %d: %v", i, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("publish %d: no ack in 30s", i)
		}
	}
	return seqs
}

// chunkKeys lists the chunk and delta keys of a thread in a snapshot
// bucket, purge markers left out (one
// multi-last direct get: cheaper than a KV key listing, which creates a
// consumer).
func (e *env) chunkKeys(t testing.TB, bucket, tenant, thread string) []string {
	t.Helper()
	pfx := "$KV." + bucket + "."
	it, err := jetstreamext.GetLastMsgsFor(context.Background(), e.js, "KV_"+bucket, []string{pfx + tenant + "." + thread + ".>"})
	require.NoError(t, err)
	var keys []string
	for m, err := range it {
		if errors.Is(err, jetstreamext.ErrNoMessages) {
			break
		}
		require.NoError(t, err)
		if m.Header.Get("KV-Operation") != "" {
			continue // a purge marker (of an old delta), not a chunk
		}
		keys = append(keys, m.Subject[len(pfx):])
	}
	return keys
}

// testLogger logs warnings and errors to t.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// waitConsumerIdle polls until the durable consumer has delivered and seen
// acked every trigger.
func (e *env) waitConsumerIdle(t testing.TB, durable string) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		c, err := e.js.Consumer(context.Background(), "CONVLOG", durable)
		require.NoError(t, err)
		info, err := c.Info(context.Background())
		require.NoError(t, err)
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "consumer %s not idle: %d pending, %d unacked", durable, info.NumPending, info.NumAckPending)
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

// waitIndex polls until the thread's index entry holds version v (it is
// written right after the head) and returns it.
func (e *env) waitIndex(t testing.TB, tenant, thread string, v uint64) snapstore.Summary {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		entry, err := e.res.Index.Get(context.Background(), snapstore.IndexKey(tenant, thread))
		if err == nil {
			sum, err := e.summary(t, tenant, thread, entry)
			require.NoError(t, err)
			if sum.Version >= v {
				return sum
			}
		}
		require.True(t, time.Now().Before(deadline), "index entry of %s/%s not at version %d in time (%v)", tenant, thread, v, err)
		time.Sleep(2 * time.Millisecond) // polling interval
	}
}
