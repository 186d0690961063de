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

// stateCache is a small LRU of windowed thread states, keyed by
// tenant/thread, at most max of them (0: off). States in the cache are
// never mutated: get returns a private copy.
type stateCache struct {
	max int
	c   *lru.Cache[string, *fold.State]
}

func newStateCache(max int) *stateCache {
	return &stateCache{max: max, c: lru.New[string, *fold.State](max, 0)}
}

func (c *stateCache) get(key string) *fold.State {
	if s := c.peek(key); s != nil {
		return trim(s)
	}
	return nil
}

// put stores s if it is newer than what is cached.
func (c *stateCache) put(key string, s *fold.State) {
	if c.max <= 0 || s == nil {
		return
	}
	c.store(key, trim(s))
}

// store keeps w (owned by the cache from now on) if it is not older than
// what is cached, evicting the least recently used entries beyond max.
func (c *stateCache) store(key string, w *fold.State) {
	c.c.PutIf(key, w, 1, func(old *fold.State) bool { return old.Version <= w.Version })
}

// peek returns the cached state of key itself, not a copy: callers must
// not change it. Used by the append hot path with [stateCache.own].
func (c *stateCache) peek(key string) *fold.State {
	if c.max <= 0 {
		return nil
	}
	s, _ := c.c.Get(key)
	return s
}

// own is [stateCache.put] without the copy: the cache takes s, which must
// hold at most windowSize messages and not be changed by anyone after.
func (c *stateCache) own(key string, s *fold.State) {
	if c.max <= 0 || s == nil {
		return
	}
	if len(s.Messages) > windowSize {
		c.put(key, s)
		return
	}
	c.store(key, s)
}

func (c *stateCache) drop(key string) { c.c.Remove(key) }

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
