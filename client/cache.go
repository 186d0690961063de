package client

import (
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/lru"
)

// windowSize is how many newest messages a cached state keeps. The fold's
// checks of messages, results and state changes need none (ErrNeedHistory
// says when one does); the window serves a compaction that cuts inside it
// and a retried turn of up to windowSize messages, found by its first event
// id without a read. Anything else falls back to a read. Every append
// copies the window.
const windowSize = 4

// stateCacheBytes bounds the memory of a client's state cache besides its
// count (Config.CacheThreads), by the estimate stateCost: windowed states
// are small, but their few messages and key-value state have no bound of
// their own (an image part, a large state value).
const stateCacheBytes = 32 << 20

// stateCache is a small LRU of windowed thread states, keyed by
// tenant/thread, at most max of them (0: off) and stateCacheBytes of
// them. States in the cache are never mutated: get returns a private copy.
type stateCache struct {
	max int
	c   *lru.Cache[threadRef, *fold.State]
}

// threadRef names a thread in the state cache: comparable as it is, so
// that a look-up builds no key.
type threadRef struct{ tenant, thread string }

func newStateCache(max int) *stateCache {
	return &stateCache{max: max, c: lru.New[threadRef, *fold.State](max, stateCacheBytes)}
}

// stateCost estimates the memory of a windowed state in bytes: a fixed
// part, each message's struct and strings, pending calls, and the
// key-value state and metadata.
func stateCost(s *fold.State) int64 {
	n := 2048 + 64*len(s.Pending)
	for i := range s.Messages {
		m := &s.Messages[i]
		n += 300 + len(m.Content.Text) + len(m.Reasoning) + len(m.Metadata) + len(m.EventID)
		for _, p := range m.Content.Parts {
			n += 128 + len(p.Text) + len(p.URL) + len(p.Data)
		}
		for _, tc := range m.ToolCalls {
			n += 64 + len(tc.ID) + len(tc.Name) + len(tc.Arguments)
		}
	}
	for k, v := range s.KV {
		n += 64 + len(k) + len(v)
	}
	for k, v := range s.Metadata {
		n += 64 + len(k) + len(v)
	}
	return int64(n)
}

func (c *stateCache) get(key threadRef) *fold.State {
	if s := c.peek(key); s != nil {
		return trim(s)
	}
	return nil
}

// put stores s if it is newer than what is cached.
func (c *stateCache) put(key threadRef, s *fold.State) {
	if c.max <= 0 || s == nil {
		return
	}
	c.store(key, trim(s))
}

// store keeps w (owned by the cache from now on) if it is not older than
// what is cached, evicting the least recently used entries beyond max.
func (c *stateCache) store(key threadRef, w *fold.State) {
	c.c.PutIf(key, w, stateCost(w), func(old *fold.State) bool { return old.Version <= w.Version })
}

// peek returns the cached state of key itself, not a copy: callers must
// not change it. Used by the append hot path with [stateCache.own].
func (c *stateCache) peek(key threadRef) *fold.State {
	if c.max <= 0 {
		return nil
	}
	s, _ := c.c.Get(key)
	return s
}

// own is [stateCache.put] without the copy: the cache takes s, which must
// hold at most windowSize messages and not be changed by anyone after.
func (c *stateCache) own(key threadRef, s *fold.State) {
	if c.max <= 0 || s == nil {
		return
	}
	if len(s.Messages) > windowSize {
		c.put(key, s)
		return
	}
	c.store(key, s)
}

func (c *stateCache) drop(key threadRef) { c.c.Remove(key) }

// trim returns a copy of s with at most windowSize newest messages.
func trim(s *fold.State) *fold.State {
	c := s.Clone0()
	n := len(s.Messages)
	if n > windowSize {
		c.Base = s.Base + n - windowSize
		c.Messages = append(c.Messages, s.Messages[n-windowSize:]...)
	} else {
		c.Messages = append(c.Messages, s.Messages...)
	}
	return c
}
