package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/snapstore"
)

// ThreadState is a thread's key-value state (AgentKit state.kv; the
// state.set and state.deleted events) at a thread version.
type ThreadState struct {
	// Version is the thread version the state is at.
	Version uint64
	// KV holds the keys asked for, with their JSON values.
	KV map[string]json.RawMessage
}

// maxStateAttempts bounds how often SetStateIfAbsent reads and appends
// again after another writer moved the thread in between.
const maxStateAttempts = 8

// State returns the thread's key-value state at its current version: every
// key, or only those that start with prefix. It reads the snapshot's head,
// which holds the whole key-value state, and folds the log's tail after
// it, so it includes every acknowledged event (as [Consistent]) without
// reading the history's chunks.
//
// Errors: as [Client.Get] (a *NotFoundError for a thread that does not
// exist, is erased or is soft-deleted), id errors, NATS and context
// errors.
func (c *Client) State(ctx context.Context, tenant, thread, prefix string) (ThreadState, error) {
	if p := c.route(tenant, thread); p != c {
		return p.State(ctx, tenant, thread, prefix)
	}
	if err := c.check(); err != nil {
		return ThreadState{}, err
	}
	s, err := c.headState(ctx, tenant, thread)
	if err != nil {
		return ThreadState{}, err
	}
	if err := notFound(s); err != nil {
		return ThreadState{}, err
	}
	st := ThreadState{Version: s.Version, KV: map[string]json.RawMessage{}}
	for k, v := range s.KV {
		if strings.HasPrefix(k, prefix) {
			st.KV[k] = v
		}
	}
	return st, nil
}

// SetStateIfAbsent sets key to value (any JSON-marshalable value) only if
// the thread's key-value state does not hold key: it reads the state and
// appends state.set conditional on the version it read, reading again
// when another writer moved the thread in between. It returns the new
// thread version.
//
// Errors: [ErrStateKeyExists] (wrapped, with the version that holds the
// key) when the key is set; as [Client.State] and [Client.Append].
func (c *Client) SetStateIfAbsent(ctx context.Context, tenant, thread, key string, value any) (uint64, error) {
	if p := c.route(tenant, thread); p != c {
		return p.SetStateIfAbsent(ctx, tenant, thread, key, value)
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return 0, fmt.Errorf("client: state %q of %s/%s: %w", key, tenant, thread, err)
	}
	for attempt := 1; ; attempt++ {
		st, err := c.State(ctx, tenant, thread, key)
		if err != nil {
			return 0, err
		}
		if _, ok := st.KV[key]; ok {
			return st.Version, fmt.Errorf("client: state %q of %s/%s at version %d: %w", key, tenant, thread, st.Version, ErrStateKeyExists)
		}
		res, err := c.Append(ctx, tenant, thread, []events.Event{{Payload: events.StateSet{Key: key, Value: raw}}}, ExpectVersion(st.Version))
		var ce *ConflictError
		if errors.As(err, &ce) && attempt < maxStateAttempts {
			continue
		}
		return res.Version, err
	}
}

// headState is the thread's state with its key-value state complete and
// its history a window: the snapshot's head plus the log's tail (a fold of
// the whole log when there is no usable snapshot).
func (c *Client) headState(ctx context.Context, tenant, thread string) (*fold.State, error) {
	probe, err := c.probeThread(ctx, tenant, thread)
	if err != nil {
		return nil, err
	}
	snap, err := c.snaps.LoadHead(ctx, tenant, thread)
	switch {
	case err == nil:
		s := snap.State
		if err := c.foldTailProbed(ctx, s, 0, probe); err != nil {
			return nil, err
		}
		return s, nil
	case errors.Is(err, snapstore.ErrNoSnapshot), errors.Is(err, snapstore.ErrCorrupt):
		return c.foldFrom(ctx, tenant, thread, 0)
	}
	return nil, fmt.Errorf("client: snapshot head of %s/%s: %w", tenant, thread, err)
}

// notFound is the *NotFoundError [Client.Get] gives for s, or nil.
func notFound(s *fold.State) error {
	switch {
	case s.Erased:
		return &NotFoundError{Tenant: s.Tenant, Thread: s.Thread, Reason: "erased", Cause: ErrThreadErased}
	case s.Version == 0 || !s.Exists:
		return &NotFoundError{Tenant: s.Tenant, Thread: s.Thread}
	case s.Deleted:
		return &NotFoundError{Tenant: s.Tenant, Thread: s.Thread, Reason: "deleted; undelete it to use its state", Cause: ErrThreadDeleted}
	}
	return nil
}
