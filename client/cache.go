package client

import (
	"container/list"
	"sync"

	"github.com/convlog/convlog/projector"
)

// windowSize is how many newest messages a cached state keeps. The fold's
// checks of messages, results and state changes need none (ErrNeedHistory
// says when one does); the window serves a compaction that cuts inside it
// and a retried turn of up to windowSize messages, found by its first event
// id without a read. Anything else falls back to a read. Every append
// copies the window (was 8: a third of Append's allocated bytes).
const windowSize = 4

// stateCache is a small LRU of windowed thread states, keyed by
// tenant/thread. States in the cache are never mutated: get returns a
// private copy.
type stateCache struct {
	mu  sync.Mutex
	max int
	ll  *list.List
	m   map[string]*list.Element
}

type cacheEntry struct {
	key string
	s   *projector.State
}

func newStateCache(max int) *stateCache {
	return &stateCache{max: max, ll: list.New(), m: map[string]*list.Element{}}
}

func (c *stateCache) get(key string) *projector.State {
	if c.max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		return trim(e.Value.(*cacheEntry).s)
	}
	return nil
}

// put stores s if it is newer than what is cached.
func (c *stateCache) put(key string, s *projector.State) {
	if c.max <= 0 || s == nil {
		return
	}
	c.store(key, trim(s))
}

// store keeps w (owned by the cache from now on) if it is newer than what
// is cached, evicting the least recently used entries beyond max.
func (c *stateCache) store(key string, w *projector.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		ent := e.Value.(*cacheEntry)
		if ent.s.Version <= w.Version {
			ent.s = w
		}
		c.ll.MoveToFront(e)
		return
	}
	c.m[key] = c.ll.PushFront(&cacheEntry{key: key, s: w})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.m, old.Value.(*cacheEntry).key)
	}
}

// peek returns the cached state of key itself, not a copy: callers must
// not change it. Used by the append hot path with [stateCache.own] (they
// belong beside get and put in cache.go).
func (c *stateCache) peek(key string) *projector.State {
	if c.max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheEntry).s
	}
	return nil
}

// own is [stateCache.put] without the copy: the cache takes s, which must
// hold at most windowSize messages and not be changed by anyone after.
func (c *stateCache) own(key string, s *projector.State) {
	if c.max <= 0 || s == nil {
		return
	}
	if len(s.Messages) > windowSize {
		c.put(key, s)
		return
	}
	c.store(key, s)
}

func (c *stateCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.Remove(e)
		delete(c.m, key)
	}
}

// trim returns a copy of s with at most windowSize newest messages.
func trim(s *projector.State) *projector.State {
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
