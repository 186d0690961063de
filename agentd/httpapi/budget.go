package httpapi

import (
	"context"
	"sync"
)

// byteBudget counts bytes held in memory against a limit: holders acquire
// bytes before they hold them (waiting while the budget is spent) and
// release them when they let go. It is the server-wide budget of
// Config.StreamTotalBytes. Safe for concurrent use.
type byteBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64
	// freed is closed and replaced whenever bytes are released, waking
	// every waiter to try again.
	freed chan struct{}
}

func newByteBudget(limit int64) *byteBudget {
	return &byteBudget{limit: limit, freed: make(chan struct{})}
}

// acquire takes n bytes, waiting until they fit or ctx ends (then it
// returns ctx's error and takes nothing). A request larger than the whole
// budget is granted when nothing else is held, so one huge event can
// still be sent.
func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.used+n <= b.limit || b.used == 0 {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// force takes n bytes without waiting, even beyond the limit: for bytes
// already in memory (a frame just encoded) that must be counted.
func (b *byteBudget) force(n int64) {
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
}

// release gives back n bytes.
func (b *byteBudget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// inUse returns the bytes held.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// holding is what one holder (a stream, a page request) has taken from a
// byteBudget; release gives it all back. Used by one goroutine.
type holding struct {
	b    *byteBudget
	held int64
}

func (h *holding) acquire(ctx context.Context, n int64) error {
	if err := h.b.acquire(ctx, n); err != nil {
		return err
	}
	h.held += n
	return nil
}

func (h *holding) force(n int64) {
	h.b.force(n)
	h.held += n
}

// give returns n of the held bytes.
func (h *holding) give(n int64) {
	n = min(n, h.held)
	h.b.release(n)
	h.held -= n
}

// releaseAll returns everything held.
func (h *holding) releaseAll() { h.give(h.held) }
