package client

import (
	"context"
	"errors"

	"github.com/convlog/convlog/events"
)

// CreateOptions describe a new thread. ThreadID is optional: the AgentKit
// precedence is an explicit ThreadID, else Config.NewThreadID (the
// createThread hook), else a generated UUIDv7.
type CreateOptions struct {
	Tenant   string // default events.DefaultTenant
	ThreadID string
	events.ThreadCreated
	// EventID of the thread.created event, for an idempotent retry
	// (default: a new UUIDv7).
	EventID string
}

// CreateThread appends thread.created to a new thread (conditional on the
// thread having no events) and returns the thread id and version.
//
// A thread id whose subject holds events that created nothing (a stray
// first event published over NATS without thread.created: the fold
// rejects it as no_thread) is not taken: CreateThread appends
// thread.created after them, conditional on the version it read, and the
// thread keeps them as rejections.
//
// A soft-deleted thread's id is free again: CreateThread appends
// thread.created after its events (conditional on the version it read) and
// the fold starts a new lifetime (fold.State.Lifetime); the old lifetime's
// events stay in the log, readable at their sequences, and it can no longer
// be undeleted (fork it at a sequence of its own to get it back).
//
// Errors: [ErrThreadExists] (wrapped) when the thread exists, was erased,
// or this is not a retry of the same create; validation errors as for
// Append.
func (c *Client) CreateThread(ctx context.Context, opts CreateOptions) (tenant, thread string, version uint64, err error) {
	tenant, thread = opts.Tenant, opts.ThreadID
	if tenant == "" {
		tenant = events.DefaultTenant
	}
	if thread == "" {
		thread = c.cfg.NewThreadID()
	}
	ev := events.Event{ID: opts.EventID, Payload: opts.ThreadCreated}
	res, err := c.Append(ctx, tenant, thread, []events.Event{ev}, ExpectVersion(0))
	for attempt := 0; attempt < 3; attempt++ {
		var conflict *ConflictError
		if !errors.As(err, &conflict) {
			break
		}
		th, gerr := c.Get(ctx, tenant, thread, Consistent(), IncludeDeleted())
		if gerr != nil || th.Exists && !th.Deleted || th.Erased {
			return tenant, thread, conflict.Actual, errors.Join(ErrThreadExists, err)
		}
		// Only events that created nothing are stored, or the thread is
		// soft-deleted: create after them (a new lifetime).
		res, err = c.Append(ctx, tenant, thread, []events.Event{ev}, ExpectVersion(th.Version))
	}
	var conflict *ConflictError
	if errors.As(err, &conflict) {
		return tenant, thread, conflict.Actual, errors.Join(ErrThreadExists, err)
	}
	if err != nil {
		return tenant, thread, 0, err
	}
	return tenant, thread, res.Version, nil
}
