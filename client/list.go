package client

import (
	"context"
	"errors"
	"time"
)

// ThreadSummary is one thread in a listing: what the projector keeps in the
// index bucket for each thread.
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
	Deleted      bool              `json:"deleted,omitempty"`
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

// ErrBadCursor: the cursor was not produced by List.
var ErrBadCursor = errors.New("client: bad list cursor")

// List returns the threads of tenant, newest first, filtered and paged.
func (c *Client) List(ctx context.Context, tenant string, opts ListOptions) (ListPage, error) {
	return ListPage{}, errors.New("client: List is not implemented yet")
}
