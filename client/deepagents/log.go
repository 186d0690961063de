package deepagents

import (
	"context"
	"errors"
	"fmt"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// Log is the part of [*client.Client] the checkpointer uses.
// *client.Client implements it.
type Log interface {
	// Get is [client.Client.Get].
	Get(ctx context.Context, tenant, thread string, opts ...client.GetOption) (*client.Thread, error)
	// Append is [client.Client.Append].
	Append(ctx context.Context, tenant, thread string, evs []events.Event, opts ...client.AppendOption) (client.AppendResult, error)
}

// LogConfig configures a [LogCheckpointer]. The zero value works.
type LogConfig struct {
	// Tenant of the checkpointer's threads. Default events.DefaultTenant.
	Tenant string
	// Thread holds the attributes of the threads Save creates (owner,
	// agent, system prompt, metadata). Thread.Replies defaults to
	// events.RepliesOff: the DeepAgents agent answers its own threads, so
	// agentd's workers must not.
	Thread events.ThreadCreated
	// MaxConflicts bounds how often one Save re-reads the thread and plans
	// again because another writer changed it in between. Default 10.
	MaxConflicts int
}

// LogCheckpointer is a [Checkpointer] and [VersionedCheckpointer] on
// convlog: each thread id is a thread of the log, and Save records the
// change from the stored history to the saved one as events (see the
// package doc for the rule). It holds no per-thread state and is safe for
// concurrent use.
type LogCheckpointer struct {
	log Log
	cfg LogConfig
}

// NewLogCheckpointer returns a checkpointer on log (usually a
// *client.Client).
func NewLogCheckpointer(log Log, cfg LogConfig) *LogCheckpointer {
	if cfg.Tenant == "" {
		cfg.Tenant = events.DefaultTenant
	}
	if cfg.Thread.Replies == "" {
		cfg.Thread.Replies = events.RepliesOff
	}
	if cfg.MaxConflicts <= 0 {
		cfg.MaxConflicts = 10
	}
	return &LogCheckpointer{log: log, cfg: cfg}
}

var _ VersionedCheckpointer = (*LogCheckpointer)(nil)

// Load returns the thread's projected history (read consistently: every
// acknowledged event, the caller's own saves included), with the log
// fields zeroed. An unknown, soft-deleted or erased thread loads as an
// empty history; an empty id returns nil.
//
// Errors: *events.IDError for an id that is not a valid thread id; read
// errors (ctx, connection).
func (c *LogCheckpointer) Load(ctx context.Context, threadID string) ([]events.Message, error) {
	ms, _, err := c.LoadVersion(ctx, threadID)
	return ms, err
}

// LoadVersion is Load plus the thread's version (the stream sequence of
// its last event; 0 for an unknown thread).
func (c *LogCheckpointer) LoadVersion(ctx context.Context, threadID string) ([]events.Message, uint64, error) {
	if threadID == "" {
		return nil, 0, nil
	}
	th, err := c.log.Get(ctx, c.cfg.Tenant, threadID, client.Consistent())
	if errors.Is(err, client.ErrThreadNotFound) {
		return []events.Message{}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("deepagents: load %s/%s: %w", c.cfg.Tenant, threadID, err)
	}
	return cleanAll(th.Messages), th.Version, nil
}

// Save stores messages as the thread's history: it reads the thread,
// plans the change (append the new suffix, compaction, restore or reset:
// see the package doc) and appends it conditionally on the version it
// read, all events of the change in one atomic append. If another writer
// changed the thread in between, it reads and plans again (up to
// LogConfig.MaxConflicts times): the thread ends up with exactly messages,
// the last save wins, and the other writer's events stay in the log
// before it. A thread that does not exist is created by the same atomic
// append. A change of more than client.MaxTurnEvents events is appended in
// several appends, each conditional on the previous one; if it is
// interrupted, the next Save of the same history completes it.
//
// Errors: an error wrapping [ErrInvalidHistory] (nothing is stored);
// *client.ConflictError after MaxConflicts conflicts; an error wrapping
// client.ErrThreadNotFound when the thread is soft-deleted or was erased;
// *client.TooLargeError when a message (or, for a restore, the whole
// history) exceeds the server's max payload; ctx and connection errors.
func (c *LogCheckpointer) Save(ctx context.Context, threadID string, messages []events.Message) error {
	if threadID == "" {
		return nil
	}
	_, err := c.save(ctx, threadID, messages, nil)
	return err
}

// SaveVersion is Save conditional on the thread being at version: see
// [VersionedCheckpointer]. It does not retry on a conflict.
func (c *LogCheckpointer) SaveVersion(ctx context.Context, threadID string, messages []events.Message, version uint64) (uint64, error) {
	if threadID == "" {
		return 0, nil
	}
	return c.save(ctx, threadID, messages, &version)
}

func (c *LogCheckpointer) save(ctx context.Context, threadID string, messages []events.Message, expect *uint64) (uint64, error) {
	if err := Validate(messages); err != nil {
		return 0, err
	}
	tenant := c.cfg.Tenant
	var missing error // the not-found error of the previous attempt
	for attempt := 1; ; attempt++ {
		var s *fold.State
		th, err := c.log.Get(ctx, tenant, threadID, client.Consistent(), client.IncludeDeleted())
		switch {
		case errors.Is(err, client.ErrThreadNotFound):
			if missing != nil {
				// The thread looked missing, yet creating it conflicted,
				// twice: its id has a history that cannot be read (erased).
				return 0, fmt.Errorf("deepagents: save %s/%s: %w (its id cannot be reused: start a new thread)", tenant, threadID, err)
			}
			missing = err
		case err != nil:
			return 0, fmt.Errorf("deepagents: save %s/%s: %w", tenant, threadID, err)
		case th.Deleted:
			return 0, fmt.Errorf("deepagents: save %s/%s: %w", tenant, threadID,
				&client.NotFoundError{Tenant: tenant, Thread: threadID, Reason: "deleted; undelete it to save to it"})
		default:
			s, missing = th.FoldState(), nil
		}
		var version uint64
		if s != nil {
			version = s.Version
		}
		if expect != nil && *expect != version {
			return 0, &client.ConflictError{Tenant: tenant, Thread: threadID, Expected: *expect, Actual: version}
		}
		p := planSave(s, messages)
		evs := p.events(messages)
		if len(evs) == 0 {
			return version, nil
		}
		if s == nil {
			evs = append([]events.Event{{Payload: c.cfg.Thread}}, evs...)
		}
		version, err = c.appendAll(ctx, threadID, evs, version)
		var conflict *client.ConflictError
		if errors.As(err, &conflict) && expect == nil && attempt < c.cfg.MaxConflicts {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("deepagents: save %s/%s: %w", tenant, threadID, err)
		}
		return version, nil
	}
}

// appendAll appends evs at version, in atomic appends of at most
// client.MaxTurnEvents events chained by version, and returns the new
// version.
func (c *LogCheckpointer) appendAll(ctx context.Context, threadID string, evs []events.Event, version uint64) (uint64, error) {
	for len(evs) > 0 {
		n := min(len(evs), client.MaxTurnEvents)
		res, err := c.log.Append(ctx, c.cfg.Tenant, threadID, evs[:n], client.ExpectVersion(version))
		if err != nil {
			return 0, err
		}
		version, evs = res.Version, evs[n:]
	}
	return version, nil
}

// Clear discards the thread's history with a thread.reset event: the
// earlier events stay in the log (the record of the conversation), the
// thread's key-value state and attributes stay, and Load returns an empty
// history. Clearing an unknown thread or an empty history records nothing;
// an empty id does nothing. To remove a thread physically, use
// client.Erase.
//
// Errors: *events.IDError; *fold.RejectionError (a soft-deleted
// thread); ctx and connection errors.
func (c *LogCheckpointer) Clear(ctx context.Context, threadID string) error {
	if threadID == "" {
		return nil
	}
	th, err := c.log.Get(ctx, c.cfg.Tenant, threadID, client.Consistent())
	if errors.Is(err, client.ErrThreadNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deepagents: clear %s/%s: %w", c.cfg.Tenant, threadID, err)
	}
	if th.MessageCount() == 0 {
		return nil
	}
	_, err = c.log.Append(ctx, c.cfg.Tenant, threadID, []events.Event{{Payload: events.Reset{Reason: "deepagents: clear"}}}, client.AnyVersion())
	if err != nil {
		return fmt.Errorf("deepagents: clear %s/%s: %w", c.cfg.Tenant, threadID, err)
	}
	return nil
}
