// Package lru is the size-bounded least-recently-used cache behind
// convlog's in-memory caches (the projector's heads, the client's thread
// states): a map plus a recency list, bounded by a number of entries and
// by a total cost (an estimate of bytes that the caller gives with each
// entry).
package lru

import (
	"container/list"
	"sync"
)

// Cache maps keys to values of type V and evicts the least recently used
// entries while it holds more than MaxEntries entries or more than
// MaxCost of total cost; the newest entry is always kept, even when it
// alone costs more than MaxCost. It is safe for concurrent use. Values are
// stored as given: a caller that shares them must not modify them.
type Cache[K comparable, V any] struct {
	mu         sync.Mutex
	maxEntries int
	maxCost    int64
	cost       int64
	ll         *list.List // of *entry[K, V], most recent first
	m          map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	cost int64
}

// New returns a cache of at most maxEntries entries (0 or less: the cache
// keeps nothing) and maxCost total cost (0 or less: no cost bound).
func New[K comparable, V any](maxEntries int, maxCost int64) *Cache[K, V] {
	return &Cache[K, V]{maxEntries: maxEntries, maxCost: maxCost, ll: list.New(), m: map[K]*list.Element{}}
}

// Get returns the value of key and marks it most recently used; ok is
// false when key is not cached.
func (c *Cache[K, V]) Get(key K) (v V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*entry[K, V]).val, true
	}
	return v, false
}

// Put stores v under key with the given cost, replacing what key held, and
// marks it most recently used; then it evicts as the bounds require.
func (c *Cache[K, V]) Put(key K, v V, cost int64) {
	c.PutIf(key, v, cost, nil)
}

// PutIf is Put, except that when key is cached already its value is
// replaced only if replace(old) is true (nil: always); the entry is marked
// most recently used either way. It reports whether v was stored.
func (c *Cache[K, V]) PutIf(key K, v V, cost int64, replace func(old V) bool) bool {
	if c.maxEntries <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	stored := true
	if e, ok := c.m[key]; ok {
		ent := e.Value.(*entry[K, V])
		if replace == nil || replace(ent.val) {
			c.cost += cost - ent.cost
			ent.val, ent.cost = v, cost
		} else {
			stored = false
		}
		c.ll.MoveToFront(e)
	} else {
		c.m[key] = c.ll.PushFront(&entry[K, V]{key: key, val: v, cost: cost})
		c.cost += cost
	}
	for c.ll.Len() > 1 && (c.ll.Len() > c.maxEntries || (c.maxCost > 0 && c.cost > c.maxCost)) {
		c.remove(c.ll.Back())
	}
	return stored
}

// Remove drops key (nothing happens when it is not cached).
func (c *Cache[K, V]) Remove(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.remove(e)
	}
}

// Len is the number of entries; Cost their total cost.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Cost is the total cost of the entries held.
func (c *Cache[K, V]) Cost() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cost
}

func (c *Cache[K, V]) remove(e *list.Element) {
	ent := e.Value.(*entry[K, V])
	c.ll.Remove(e)
	delete(c.m, ent.key)
	c.cost -= ent.cost
}
