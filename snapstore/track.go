package snapstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// trackRing is how many of the watch's latest deliveries a tracker keeps,
// to find those that arrived while a head was being read (trust).
const trackRing = 4096

// trackedHeads bounds the heads a tracker vouches for (as many as
// LoadView keeps decoded: sharedHeads).
const trackedHeads = sharedHeads

// TrackHeads makes [Store.LoadView] skip the head's KV get for a thread
// whose head it decoded before, while a watch of the bucket's heads shows
// that the head has not changed since: client-side caching with
// server-assisted invalidation, as Redis's CLIENT TRACKING, so that a warm
// view costs no round trip. It needs the chunk cache
// (Options.ChunkCacheBytes not negative) and permission to create an
// ordered consumer on the bucket's stream (KV_<bucket>); it returns an
// error when either is missing, or when tracking was started already.
//
// The watch is an ordered consumer of the heads' subjects
// ("$KV.<bucket>.*.*": a head key has two tokens, chunks and deltas more),
// headers only, from the newest message on. A view served without the get
// may be older than the stored head by the watch's delivery delay (under
// a millisecond on one machine), on top of the projection lag every view
// has. The Store trusts no head, and reads every one, while the watch
// cannot vouch for it: before the watch has started; after any error the
// watch reports (a missed heartbeat, 2.5 s, a deleted consumer) until it
// has delivered again up to the bucket's last message; while the
// connection is not connected or has reconnected since. A head read while
// an update of it was on its way is trusted only if the update was older:
// the Store compares the revision it read with the updates the watch
// delivered in the meantime (the last 4,096).
//
// Tracking stops when ctx ends. Safe for concurrent use with reads.
func (s *Store) TrackHeads(ctx context.Context, js jetstream.JetStream) error {
	if s.heads == nil {
		return errors.New("snapstore: TrackHeads needs the chunk cache (ChunkCacheBytes is negative)")
	}
	bucket := s.kv.Bucket()
	prefix := "$KV." + bucket + "."
	t := &tracker{nc: js.Conn(), trusted: map[string]uint64{}}
	if !s.tracker.CompareAndSwap(nil, t) {
		return errors.New("snapstore: TrackHeads called twice")
	}
	cons, err := js.OrderedConsumer(ctx, "KV_"+bucket, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{prefix + "*.*"}, DeliverPolicy: jetstream.DeliverNewPolicy, HeadersOnly: true})
	if err != nil {
		s.tracker.Store(nil)
		return fmt.Errorf("snapstore: watch of the heads of bucket %s: %w", bucket, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			t.lose()
			return
		}
		t.deliver(strings.TrimPrefix(m.Subject(), prefix), md.Sequence.Stream, md.NumPending)
	}, jetstream.PullExpiry(5*time.Second), jetstream.ConsumeErrHandler(func(jetstream.ConsumeContext, error) { t.lose() }))
	if err != nil {
		s.tracker.Store(nil)
		return fmt.Errorf("snapstore: watch of the heads of bucket %s: %w", bucket, err)
	}
	// The consumer exists: every head written from now on is delivered.
	t.start()
	go func() {
		<-ctx.Done()
		cc.Stop()
		t.lose()
		s.tracker.CompareAndSwap(t, nil)
	}()
	return nil
}

// tracker vouches for the heads a Store decoded (TrackHeads). All fields
// under mu.
type tracker struct {
	nc *nats.Conn
	mu sync.Mutex
	// current: the watch has delivered every head update it could know
	// of; reconnects is the connection's reconnect count then.
	current    bool
	reconnects uint64
	// gen changes whenever current does: a mark of an older gen is void.
	gen uint64
	// trusted maps a head key to the revision of the head the Store
	// decoded, which no update the watch delivered has superseded.
	trusted map[string]uint64
	// ring holds the last deliveries; delivered counts them all.
	ring      [trackRing]trackDelivery
	delivered uint64
}

type trackDelivery struct {
	key string
	seq uint64
}

// trackMark is where the watch stood when a head read began.
type trackMark struct{ gen, delivered uint64 }

func (t *tracker) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setCurrent()
}

// setCurrent marks the watch current. Under mu.
func (t *tracker) setCurrent() {
	t.current, t.reconnects = true, t.nc.Stats().Reconnects
	t.gen++
}

// lose stops trusting any head until the watch is current again.
func (t *tracker) lose() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.loseLocked()
}

func (t *tracker) loseLocked() {
	t.current = false
	t.gen++
	clear(t.trusted)
}

// live reports whether the watch vouches for anything now: current, and
// the connection connected without a reconnect since. Under mu.
func (t *tracker) live() bool {
	if !t.current {
		return false
	}
	if t.nc.Status() != nats.CONNECTED || t.nc.Stats().Reconnects != t.reconnects {
		t.loseLocked()
		return false
	}
	return true
}

// trusts reports whether the head of key at revision rev, decoded
// before, is still the stored one as far as the watch knows.
func (t *tracker) trusts(key string, rev uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.trusted[key]
	return ok && r == rev && t.live()
}

// distrust stops trusting key's head (a chunk it names is gone: a newer
// head exists, which the watch has not delivered yet).
func (t *tracker) distrust(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.trusted, key)
}

// mark returns where the watch stands, before a head is read.
func (t *tracker) mark() trackMark {
	t.mu.Lock()
	defer t.mu.Unlock()
	return trackMark{gen: t.gen, delivered: t.delivered}
}

// trust records that key's head is at revision rev, read after m: unless
// the watch stopped vouching since m, or delivered since m an update of
// key newer than rev (the read raced it), or delivered too many to tell.
func (t *tracker) trust(key string, rev uint64, m trackMark) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.live() || m.gen != t.gen || t.delivered-m.delivered > trackRing {
		return
	}
	for i := m.delivered; i < t.delivered; i++ {
		if d := t.ring[i%trackRing]; d.key == key && d.seq > rev {
			return
		}
	}
	if _, ok := t.trusted[key]; !ok && len(t.trusted) >= trackedHeads {
		for k := range t.trusted { // any one out: the heads cache is LRU
			delete(t.trusted, k)
			break
		}
	}
	t.trusted[key] = rev
}

// deliver records an update of key's head (a put, delete or purge) at
// stream sequence seq, with pending more to come.
func (t *tracker) deliver(key string, seq, pending uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring[t.delivered%trackRing] = trackDelivery{key: key, seq: seq}
	t.delivered++
	if r, ok := t.trusted[key]; ok && r < seq {
		delete(t.trusted, key)
	}
	if !t.current && pending == 0 {
		// Caught up again after an error: every update up to the
		// bucket's last one is delivered.
		t.setCurrent()
	}
}
