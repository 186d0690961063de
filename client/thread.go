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
// Errors: [ErrThreadExists] (wrapped) when the id already has events and
// this is not a retry of the same create; validation errors as for Append.
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
	var conflict *ConflictError
	if errors.As(err, &conflict) {
		return tenant, thread, conflict.Actual, errors.Join(ErrThreadExists, err)
	}
	if err != nil {
		return tenant, thread, 0, err
	}
	return tenant, thread, res.Version, nil
}
