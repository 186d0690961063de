package projector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
)

// fetchConcurrency is how many chunks one read fetches at once.
const fetchConcurrency = 8

// loadAttempts is how often Load reloads the head when a chunk it names
// was purged by a newer head in the meantime.
const loadAttempts = 4

// Snapshots reads thread snapshots from the snapshot bucket (see the
// package doc for the layout). It only reads, so it needs no more than
// get permission on "$KV.<bucket>.<tenant>.>": every read is a KV Get by
// key. It is safe for concurrent use.
type Snapshots struct {
	kv jetstream.KeyValue
}

// NewSnapshots returns a reader of the snapshots in kv, the snapshot
// bucket (default "convlog_snapshots").
func NewSnapshots(kv jetstream.KeyValue) *Snapshots { return &Snapshots{kv: kv} }

// Snapshot is a thread's projected state as read from the snapshot bucket.
type Snapshot struct {
	// State is the projection. From [Snapshots.Load] it is complete (Base
	// 0, every message); from [Snapshots.LoadHead] it is a window: Messages
	// holds only the newest messages (at most Config.TailBytes of them, often
	// none) and Base counts the ones before, so MessageCount() is exact.
	// State.Version is the stream sequence of the last event folded.
	State *State
	// Revision is the KV revision of the head read. It grows with every
	// projection of the thread.
	Revision uint64
	// Gen is the layout generation (the chunk keys' generation token).
	Gen uint64
	// Chunks are the immutable chunks holding the first Base messages of
	// the head, in history order.
	Chunks []ChunkRef
	// Bytes is how many value bytes were read (head plus chunks).
	Bytes int
}

// LoadHead reads a thread's head: everything but the chunked messages.
// It costs one KV get of a small value (at most a few tens of KiB).
//
// Errors: an *events.IDError for a bad tenant or thread id; [ErrNoSnapshot]
// (wrapped) when the thread has none; [ErrCorrupt] (wrapped); KV and
// context errors as returned by nats.go, which are retryable.
func (s *Snapshots) LoadHead(ctx context.Context, tenant, thread string) (*Snapshot, error) {
	if err := validIDs(tenant, thread); err != nil {
		return nil, err
	}
	h, rev, n, err := getHead(ctx, s.kv, tenant, thread, nil)
	if err != nil {
		return nil, err
	}
	return &Snapshot{State: h.State, Revision: rev, Gen: h.Gen, Chunks: h.Chunks, Bytes: n}, nil
}

// Load reads a thread's complete snapshot: the head and then every chunk,
// fetched concurrently. Its cost is about that of reading the same bytes as
// one KV value (one head get plus the chunk gets in parallel, plus
// decoding). If a chunk is missing because a newer head replaced the
// history meanwhile, Load reloads the head and starts over, a few times.
//
// Errors: as [Snapshots.LoadHead], plus [ErrSnapshotChanged] (wrapped,
// retryable) when the history kept being replaced while it read.
func (s *Snapshots) Load(ctx context.Context, tenant, thread string) (*Snapshot, error) {
	if err := validIDs(tenant, thread); err != nil {
		return nil, err
	}
	for attempt := 0; attempt < loadAttempts; attempt++ {
		h, rev, n, err := getHead(ctx, s.kv, tenant, thread, nil)
		if err != nil {
			return nil, err
		}
		bytes, err := fillChunks(ctx, s.kv, tenant, thread, h)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &Snapshot{State: h.State, Revision: rev, Gen: h.Gen, Chunks: h.Chunks, Bytes: n + bytes}, nil
	}
	return nil, fmt.Errorf("%w: thread %s/%s after %d attempts", ErrSnapshotChanged, tenant, thread, loadAttempts)
}

func validIDs(tenant, thread string) error {
	if err := events.ValidateTenant(tenant); err != nil {
		return err
	}
	return events.ValidateThreadID(thread)
}

// getHead reads and decodes a head; n is the value size in bytes.
func getHead(ctx context.Context, kv jetstream.KeyValue, tenant, thread string, sizes *[]int) (h *head, rev uint64, n int, err error) {
	e, err := kv.Get(ctx, HeadKey(tenant, thread))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, 0, fmt.Errorf("%w for thread %s/%s", ErrNoSnapshot, tenant, thread)
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("projector: read head of %s/%s: %w", tenant, thread, err)
	}
	h, err = decodeHead(e.Value(), sizes)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("thread %s/%s: %w", tenant, thread, err)
	}
	return h, e.Revision(), len(e.Value()), nil
}

// fillChunks makes h.State complete: it fetches every chunk into place
// before the tail and sets Base to 0. It returns the chunk bytes read, or
// an error wrapping jetstream.ErrKeyNotFound when a chunk is gone.
func fillChunks(ctx context.Context, kv jetstream.KeyValue, tenant, thread string, h *head) (int, error) {
	st := h.State
	if len(h.Chunks) == 0 {
		return 0, nil
	}
	all := make([]events.Message, st.Base+len(st.Messages))
	copy(all[st.Base:], st.Messages)
	var total atomic.Int64
	err := forEach(ctx, len(h.Chunks), fetchConcurrency, func(ctx context.Context, i int) error {
		c := h.Chunks[i]
		key := ChunkKey(tenant, thread, h.Gen, c.First, c.Count)
		e, err := kv.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("projector: read chunk %s: %w", key, err)
		}
		total.Add(int64(len(e.Value())))
		if c.First < 0 || c.First+c.Count > st.Base {
			return fmt.Errorf("%w: chunk %s lies outside the head's %d chunked messages", ErrCorrupt, key, st.Base)
		}
		if err := parseMessagesInto(e.Value(), all[c.First:c.First+c.Count]); err != nil {
			return fmt.Errorf("%w: chunk %s: %v", ErrCorrupt, key, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	st.Messages, st.Base = all, 0
	return int(total.Load()), nil
}

// forEach calls fn(ctx, i) for i in [0, n) on up to conc goroutines, and
// waits for them. The first error cancels the rest and is returned; if ctx
// ends first, its error is returned.
func forEach(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	switch {
	case n == 0:
		return nil
	case n == 1 || conc <= 1:
		for i := 0; i < n; i++ {
			if err := fn(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		done  atomic.Int64
		once  sync.Once
		first error
	)
	for range min(conc, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if int(done.Load()) < n {
		return context.Cause(ctx)
	}
	return nil
}
