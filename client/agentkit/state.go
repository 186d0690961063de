package agentkit

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// State is AgentKit's state.kv for one thread: a key-value store whose
// values are JSON. Unlike AgentKit's, it is persisted: every Set is a
// state.set event and every Delete a state.deleted event on the thread's
// log, and reads come from the thread's projected key-value state (with a
// consistent read, so a read sees every write acknowledged before it,
// from any writer). The fold bounds a thread's state to
// fold.MaxStateBytes.
//
// State holds no data of its own and is safe for concurrent use. Each read
// reads the thread: to read many keys at once, use [State.All].
type State struct {
	log            Log
	tenant, thread string
}

// NewState returns the key-value state of tenant/thread on log (usually a
// *client.Client). The thread must exist (create it first).
func NewState(log Log, tenant, thread string) *State {
	if tenant == "" {
		tenant = events.DefaultTenant
	}
	return &State{log: log, tenant: tenant, thread: thread}
}

// State returns the key-value state of one of the History's threads.
func (h *History) State(threadID string) *State { return NewState(h.log, h.cfg.Tenant, threadID) }

// Set sets key to value (anything encoding/json marshals) and returns the
// thread's new version. It is appended with client.AnyVersion(): a set
// does not depend on the history, so concurrent writers never conflict.
//
// Errors: a marshal error; *events.ValidationError (empty key, a key over
// 256 bytes); *fold.RejectionError (the thread does not exist, or the
// state would exceed fold.MaxStateBytes); ctx and connection errors.
func (s *State) Set(ctx context.Context, key string, value any) (uint64, error) {
	raw, err := json.Marshal(value)
	if err != nil {
		return 0, fmt.Errorf("agentkit: state %q of %s/%s: %w", key, s.tenant, s.thread, err)
	}
	return s.append(ctx, events.StateSet{Key: key, Value: raw})
}

// Delete deletes key (a missing key is not an error: the event is recorded
// all the same) and returns the thread's new version. Errors as for Set.
func (s *State) Delete(ctx context.Context, key string) (uint64, error) {
	return s.append(ctx, events.StateDeleted{Key: key})
}

func (s *State) append(ctx context.Context, p events.Payload) (uint64, error) {
	res, err := s.log.Append(ctx, s.tenant, s.thread, []events.Event{{Payload: p}}, client.AnyVersion())
	if err != nil {
		return 0, fmt.Errorf("agentkit: state of %s/%s: %w", s.tenant, s.thread, err)
	}
	return res.Version, nil
}

// Get returns the JSON value of key and whether it is set.
//
// Errors: an error wrapping [client.ErrThreadNotFound] when the thread
// does not exist; read errors.
func (s *State) Get(ctx context.Context, key string) (json.RawMessage, bool, error) {
	kv, err := s.read(ctx)
	if err != nil {
		return nil, false, err
	}
	v, ok := kv[key]
	return v, ok, nil
}

// Has reports whether key is set. Errors as for Get.
func (s *State) Has(ctx context.Context, key string) (bool, error) {
	_, ok, err := s.Get(ctx, key)
	return ok, err
}

// All returns a copy of every key and its JSON value (an empty, non-nil
// map when none is set). Errors as for Get.
func (s *State) All(ctx context.Context) (map[string]json.RawMessage, error) {
	kv, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(kv))
	maps.Copy(out, kv)
	return out, nil
}

func (s *State) read(ctx context.Context) (map[string]json.RawMessage, error) {
	th, err := s.log.Get(ctx, s.tenant, s.thread, client.Consistent())
	if err != nil {
		return nil, fmt.Errorf("agentkit: state of %s/%s: %w", s.tenant, s.thread, err)
	}
	return th.KV, nil
}

// GetAs returns the value of key decoded into a T, and whether it is set
// (the zero T when it is not).
//
// Errors: as for [State.Get]; a decode error (wrapped) when the stored
// JSON does not fit T.
func GetAs[T any](ctx context.Context, s *State, key string) (T, bool, error) {
	var v T
	raw, ok, err := s.Get(ctx, key)
	if err != nil || !ok {
		return v, ok, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, true, fmt.Errorf("agentkit: state %q of %s/%s as %T: %w", key, s.tenant, s.thread, v, err)
	}
	return v, true, nil
}
