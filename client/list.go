package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/snapstore"
)

// ThreadSummary is one thread in a listing: what the projector keeps in the
// index bucket for each thread (snapstore.Summary).
type ThreadSummary struct {
	Tenant       string            `json:"tenant"`
	Thread       string            `json:"thread"`
	Owner        string            `json:"owner,omitempty"`
	Agent        string            `json:"agent,omitempty"`
	Title        string            `json:"title,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	CreatedAt    time.Time         `json:"created_at"`
	UpdatedAt    time.Time         `json:"updated_at"`
	Version      uint64            `json:"version"`
	MessageCount int               `json:"message_count"`
	Pending      int               `json:"pending,omitempty"`
	Rejected     uint64            `json:"rejected,omitempty"`
	Deleted      bool              `json:"deleted,omitempty"`
	ForkedFrom   *fold.ForkRef     `json:"forked_from,omitempty"`
	// ExternalID is the framework id the thread was created under when it
	// is not a thread id itself (events.ThreadIDFor); "" otherwise.
	ExternalID string `json:"external_id,omitempty"`
}

func summaryOf(s snapstore.Summary) ThreadSummary {
	return ThreadSummary{Tenant: s.Tenant, Thread: s.Thread, Owner: s.Owner, Agent: s.Agent, Title: s.Title,
		Metadata: s.Metadata, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, Version: s.Version,
		MessageCount: s.Messages, Pending: s.Pending, Rejected: s.Rejected, Deleted: s.Deleted, ForkedFrom: s.ForkedFrom,
		ExternalID: s.ExternalID}
}

// ListOptions filter and page a listing. Zero values mean no filter; Limit
// defaults to 50 (max 1000).
type ListOptions struct {
	Owner          string
	Agent          string
	Metadata       map[string]string // every pair must match
	IncludeDeleted bool
	Limit          int
	// Cursor is NextCursor of the previous page ("" = first page).
	Cursor string
}

// ListPage is one page of threads, newest first (by UpdatedAt, then id).
type ListPage struct {
	Threads []ThreadSummary `json:"threads"`
	// NextCursor is "" on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// MaxListLimit is the largest page List returns.
const MaxListLimit = 1000

// List returns the threads of tenant, newest first (last update time, then
// thread id descending), filtered by owner, agent and metadata, one page at
// a time. The cursor is the (update time, id) position of the last thread
// returned: the next page starts after it, so a thread updated while a
// client pages moves to the front (it is not returned twice, and may be
// missed by that listing, as with any keyset pagination).
//
// It reads the projector's index bucket (one KV watch over
// "<tenant>.*"), so a thread appears once the projector has projected it.
// An index entry that does not decode is listed from the thread's log
// (a consistent Get) instead of being left out.
//
// Errors: *events.IDError for a bad tenant; [ErrBadCursor]; KV errors.
func (c *Client) List(ctx context.Context, tenant string, opts ListOptions) (ListPage, error) {
	if err := c.check(); err != nil {
		return ListPage{}, err
	}
	if err := events.ValidateTenant(tenant); err != nil {
		return ListPage{}, err
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, MaxListLimit)
	var after *cursor
	if opts.Cursor != "" {
		cur, err := parseCursor(opts.Cursor)
		if err != nil {
			return ListPage{}, err
		}
		after = &cur
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var all []ThreadSummary
	for _, p := range c.Partitions() {
		var err error
		if all, err = p.summaries(ctx, tenant, opts, all); err != nil {
			return ListPage{}, err
		}
	}
	slices.SortFunc(all, func(a, b ThreadSummary) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.Thread, a.Thread)
	})
	i := 0
	if after != nil {
		// The page starts at the first thread after the cursor's position.
		for i < len(all) && !before(cursor{all[i].UpdatedAt, all[i].Thread}, *after) {
			i++
		}
	}
	end := min(i+limit, len(all))
	page := ListPage{Threads: all[i:end]}
	if page.Threads == nil {
		page.Threads = []ThreadSummary{}
	}
	if end < len(all) {
		last := all[end-1]
		page.NextCursor = cursor{last.UpdatedAt, last.Thread}.String()
	}
	return page, nil
}

// summaries appends to all the summaries of tenant's threads in c's index
// bucket (one partition) that opts selects.
func (c *Client) summaries(ctx context.Context, tenant string, opts ListOptions, all []ThreadSummary) ([]ThreadSummary, error) {
	w, err := snapstore.WatchIndex(ctx, c.index, tenant)
	if err != nil {
		return all, fmt.Errorf("client: list %s: %w", tenant, err)
	}
	defer w.Stop()
	for e := range w.Updates() {
		if e == nil {
			break // initial values done
		}
		thread := snapstore.ThreadOfIndexKey(tenant, e.Key())
		plain, err := c.keys.OpenValue(ctx, tenant, thread, e.Key(), e.Value())
		var s snapstore.Summary
		if err == nil {
			s, err = snapstore.UnmarshalSummary(plain)
		}
		if err != nil {
			// The index is derived data: list the thread from its log
			// (the projector writes the entry again at its next event).
			c.cfg.Logger.Warn("list: unreadable index entry; reading the thread's log", "key", e.Key(), "err", err)
			th, gerr := c.Get(ctx, tenant, thread, Consistent(), IncludeDeleted())
			if gerr != nil {
				c.cfg.Logger.Warn("list: thread of an unreadable index entry", "key", e.Key(), "err", gerr)
				continue
			}
			s = snapstore.SummaryOf(th.state)
		}
		ts := summaryOf(s)
		if !matches(ts, opts) {
			continue
		}
		all = append(all, ts)
	}
	if ctx.Err() != nil {
		return all, fmt.Errorf("client: list %s: %w", tenant, ctx.Err())
	}
	return all, nil
}

func matches(t ThreadSummary, o ListOptions) bool {
	if t.Deleted && !o.IncludeDeleted {
		return false
	}
	if o.Owner != "" && t.Owner != o.Owner {
		return false
	}
	if o.Agent != "" && t.Agent != o.Agent {
		return false
	}
	for k, v := range o.Metadata {
		if t.Metadata[k] != v {
			return false
		}
	}
	return true
}

// cursor is a position in the listing order.
type cursor struct {
	updated time.Time
	thread  string
}

// before reports whether a comes after b in listing order (older, or same
// time and smaller id): i.e. a is on a later page than b.
func before(a, b cursor) bool {
	if c := a.updated.Compare(b.updated); c != 0 {
		return c < 0
	}
	return a.thread < b.thread
}

func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.updated.UnixNano(), 10) + ":" + c.thread))
}

func parseCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, fmt.Errorf("%w: %q is not base64url", ErrBadCursor, s)
	}
	ns, thread, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || events.ValidateThreadID(thread) != nil {
		return cursor{}, fmt.Errorf("%w: %q", ErrBadCursor, s)
	}
	return cursor{time.Unix(0, n).UTC(), thread}, nil
}

// ListAll yields every thread of tenant that opts selects, newest first,
// reading the listing a page (MaxListLimit, or opts.Limit when set) at a
// time; opts.Cursor is where it starts. A thread updated while it pages may
// be missed or seen again, as with List. The first error is yielded and
// ends the iteration. Errors as for List.
func (c *Client) ListAll(ctx context.Context, tenant string, opts ListOptions) iter.Seq2[ThreadSummary, error] {
	if opts.Limit <= 0 {
		opts.Limit = MaxListLimit
	}
	return func(yield func(ThreadSummary, error) bool) {
		for {
			page, err := c.List(ctx, tenant, opts)
			if err != nil {
				yield(ThreadSummary{}, err)
				return
			}
			for _, t := range page.Threads {
				if !yield(t, nil) {
					return
				}
			}
			if page.NextCursor == "" {
				return
			}
			opts.Cursor = page.NextCursor
		}
	}
}
