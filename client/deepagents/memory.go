package deepagents

import (
	"context"
	"sync"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// InMemoryCheckpointer is DeepAgents' InMemoryCheckpointer: histories in a
// map, for tests and single-process demos. It keeps the same contract as
// [LogCheckpointer] (checkpointertest.Run checks both): the same
// validation, the same copies in and out, versions that change with every
// change (but count changes rather than being stream sequences). Histories
// live as long as the value; a process restart loses them. It is safe for
// concurrent use (one mutex).
type InMemoryCheckpointer struct {
	mu      sync.Mutex
	threads map[string]*memThread
}

type memThread struct {
	messages []events.Message
	version  uint64
}

// NewInMemoryCheckpointer returns an empty checkpointer.
func NewInMemoryCheckpointer() *InMemoryCheckpointer {
	return &InMemoryCheckpointer{threads: map[string]*memThread{}}
}

var _ VersionedCheckpointer = (*InMemoryCheckpointer)(nil)

// Load returns a copy of the thread's history (empty when unknown; nil for
// an empty id). It never fails.
func (m *InMemoryCheckpointer) Load(ctx context.Context, threadID string) ([]events.Message, error) {
	ms, _, err := m.LoadVersion(ctx, threadID)
	return ms, err
}

// LoadVersion is Load plus the thread's version (0 when unknown).
func (m *InMemoryCheckpointer) LoadVersion(_ context.Context, threadID string) ([]events.Message, uint64, error) {
	if threadID == "" {
		return nil, 0, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.threads[threadID]
	if t == nil {
		return []events.Message{}, 0, nil
	}
	return cleanAll(t.messages), t.version, nil
}

// Save stores a copy of messages as the thread's history. Errors: an
// error wrapping [ErrInvalidHistory].
func (m *InMemoryCheckpointer) Save(_ context.Context, threadID string, messages []events.Message) error {
	if threadID == "" {
		return nil
	}
	_, err := m.save(threadID, messages, nil)
	return err
}

// SaveVersion is Save conditional on the thread being at version: see
// [VersionedCheckpointer].
func (m *InMemoryCheckpointer) SaveVersion(_ context.Context, threadID string, messages []events.Message, version uint64) (uint64, error) {
	if threadID == "" {
		return 0, nil
	}
	return m.save(threadID, messages, &version)
}

func (m *InMemoryCheckpointer) save(threadID string, messages []events.Message, expect *uint64) (uint64, error) {
	if err := Validate(messages); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.threads[threadID]
	var version uint64
	if t != nil {
		version = t.version
	}
	if expect != nil && *expect != version {
		return 0, &client.ConflictError{Tenant: events.DefaultTenant, Thread: threadID, Expected: *expect, Actual: version}
	}
	if t == nil {
		if len(messages) == 0 {
			return 0, nil
		}
		t = &memThread{}
		m.threads[threadID] = t
	} else if len(t.messages) == len(messages) && hasPrefix(messages, t.messages) {
		return t.version, nil
	}
	t.messages = cleanAll(messages)
	t.version++
	return t.version, nil
}

// Clear discards the thread's history (its version still changes, so a
// save conditional on an earlier version conflicts). Clearing an unknown
// thread or an empty history does nothing. It never fails.
func (m *InMemoryCheckpointer) Clear(_ context.Context, threadID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.threads[threadID]; t != nil && len(t.messages) > 0 {
		t.messages = nil
		t.version++
	}
	return nil
}
