package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"unicode/utf8"

	"github.com/convlog/convlog/events"
)

// MemState is an in-memory [State]: the thread's state as the worker loaded
// it, plus the changes the turn's tools make, which the worker then appends
// as state.set events (see [MemState.Changes]). It is safe for concurrent
// use.
type MemState struct {
	mu      sync.Mutex
	vals    map[string]json.RawMessage
	changed map[string]int // key -> index in changes
	changes []events.StateSet
}

var _ State = (*MemState)(nil)

// NewMemState returns a state holding a copy of initial (nil = empty).
func NewMemState(initial map[string]json.RawMessage) *MemState {
	vals := maps.Clone(initial)
	if vals == nil {
		vals = make(map[string]json.RawMessage)
	}
	return &MemState{vals: vals, changed: make(map[string]int)}
}

// Get returns the value of key.
func (s *MemState) Get(key string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vals[key]
	return bytes.Clone(v), ok
}

// Set stores value (compacted) under key. It returns an error when the key
// is empty, longer than 256 bytes or not UTF-8, or the value is not JSON
// (the rules of a state.set event).
func (s *MemState) Set(key string, value json.RawMessage) error {
	lim := events.DefaultLimits()
	switch {
	case key == "":
		return fmt.Errorf("the key is empty")
	case len(key) > lim.MaxNameLen:
		return fmt.Errorf("the key is %d bytes, the limit is %d", len(key), lim.MaxNameLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("the key is not valid UTF-8")
	}
	var c bytes.Buffer
	if err := json.Compact(&c, value); err != nil {
		return fmt.Errorf("the value is not JSON: %v", err)
	}
	v := json.RawMessage(c.Bytes())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals[key] = v
	if i, ok := s.changed[key]; ok {
		s.changes[i].Value = v
		return nil
	}
	s.changed[key] = len(s.changes)
	s.changes = append(s.changes, events.StateSet{Key: key, Value: v})
	return nil
}

// Changes returns the keys set since [NewMemState], each once with its last
// value, in the order they were first set.
func (s *MemState) Changes() []events.StateSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]events.StateSet, len(s.changes))
	for i, c := range s.changes {
		out[i] = events.StateSet{Key: c.Key, Value: bytes.Clone(c.Value)}
	}
	return out
}
