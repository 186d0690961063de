package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// ImportOptions configure [Client.ImportConversation].
type ImportOptions struct {
	// Tenant of the new thread. Default events.DefaultTenant.
	Tenant string
	// ThreadID of the new thread. Default events.ConversationThreadID
	// (deterministic, so re-importing finds the same thread).
	ThreadID string
	// Replies of the thread. Default events.RepliesOff: imported history is
	// a record, and a thread that ends on a user message is not answered.
	Replies events.ReplyMode
	// Agent and Owner recorded on thread.created (optional).
	Agent, Owner string
	// Base is the time of the first event (default now); each next event
	// is 1 ms later.
	Base time.Time
}

// ImportResult says what one conversation import stored.
type ImportResult struct {
	Tenant, Thread string
	Events         int
	Bytes          int
	Version        uint64
	// AlreadyImported is true when every event was already stored (a
	// re-import of the same conversation).
	AlreadyImported bool
}

// ImportConversation stores a transcript conversation as a new thread:
// thread.created then one event per message, in atomic batches of up to
// [MaxTurnEvents] events (so a conversation of up to 999 messages is all or
// nothing). Event ids are deterministic, so an import retried after a
// failure, or of the same file again, stores nothing twice.
//
// Errors: a conversion error naming the message; the verdicts of Append
// (e.g. a *fold.RejectionError when a tool message answers no pending
// call); *ConflictError when the thread id already holds another thread.
func (c *Client) ImportConversation(ctx context.Context, conv events.Conversation, opts ImportOptions) (ImportResult, error) {
	tenant := opts.Tenant
	if tenant == "" {
		tenant = events.DefaultTenant
	}
	thread := opts.ThreadID
	if thread == "" {
		thread = events.ConversationThreadID(conv)
	}
	replies := opts.Replies
	if replies == "" {
		replies = events.RepliesOff
	}
	base := opts.Base
	if base.IsZero() {
		base = time.Now().UTC()
	}
	evs, err := events.ConversationEvents(conv, tenant, thread, c.cfg.Producer, replies, base)
	if err != nil {
		return ImportResult{}, err
	}
	if cr, ok := evs[0].Payload.(events.ThreadCreated); ok {
		cr.Agent, cr.Owner = opts.Agent, opts.Owner
		evs[0].Payload = cr
	}
	res := ImportResult{Tenant: tenant, Thread: thread, Events: len(evs), AlreadyImported: true}
	var version uint64
	for start := 0; start < len(evs); {
		end := min(start+MaxTurnEvents, len(evs))
		// A batch must not end between a tool call and its results when
		// possible: extend the cut back to before the assistant message.
		if end < len(evs) {
			for j := end; j > start+1; j-- {
				if _, isTool := evs[j].Payload.(events.ToolResult); !isTool {
					end = j
					break
				}
			}
		}
		r, err := c.Append(ctx, tenant, thread, evs[start:end], ExpectVersion(version))
		if err != nil {
			var rej *fold.RejectionError
			if errors.As(err, &rej) {
				return res, fmt.Errorf("client: import %s (%s) into %s/%s: %w", conv.ID, conv.Source, tenant, thread, err)
			}
			return res, err
		}
		if !r.Duplicate {
			res.AlreadyImported = false
		}
		version = r.Version
		for _, e := range r.Events {
			if b, err := events.Marshal(e.Event); err == nil {
				res.Bytes += len(b)
			}
		}
		start = end
	}
	res.Version = version
	return res, nil
}
