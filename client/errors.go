package client

import (
	"errors"
	"fmt"
)

// Sentinel errors of package client. Match with errors.Is.
var (
	// ErrConflict: the thread's version is not the one the writer expected
	// (DESIGN.md invariant 3). Not retryable as is: reload, re-decide, retry
	// with the new version. Returned wrapped in *ConflictError.
	ErrConflict = errors.New("client: version conflict")
	// ErrThreadNotFound: the thread has no events, or was erased.
	ErrThreadNotFound = errors.New("client: thread not found")
	// ErrThreadExists: CreateThread for an id that already has events.
	ErrThreadExists = errors.New("client: thread already exists")
	// ErrTooLarge: an event (or a turn) is larger than the server accepts.
	// Returned wrapped in *TooLargeError.
	ErrTooLarge = errors.New("client: event too large")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client: closed")
	// ErrInvalidAppend: an Append call that cannot be made as written (no
	// version option, no events, more events than commit atomically). A
	// programming error: not retryable.
	ErrInvalidAppend = errors.New("client: invalid append")
)

// ConflictError says which version the writer expected and which the thread
// has. Actual is 0 when the server did not say (error 10164 on replicated
// streams) and the thread could not be read. It wraps [ErrConflict].
type ConflictError struct {
	Tenant, Thread string
	Expected       uint64
	Actual         uint64
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("client: thread %s/%s: version conflict: expected version %d, thread is at %d; reload the thread and retry with the new version",
		e.Tenant, e.Thread, e.Expected, e.Actual)
}

// Unwrap returns [ErrConflict].
func (e *ConflictError) Unwrap() error { return ErrConflict }

// TooLargeError names the event, its size and the limit. It wraps [ErrTooLarge].
type TooLargeError struct {
	Tenant, Thread string
	EventID        string
	Size, Limit    int
}

// Error implements error.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("client: thread %s/%s: event %s is %d bytes encoded, the limit is %d (the server's max payload); store large tool outputs elsewhere and reference them",
		e.Tenant, e.Thread, e.EventID, e.Size, e.Limit)
}

// Unwrap returns [ErrTooLarge].
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// NotFoundError names the missing thread. It wraps [ErrThreadNotFound].
type NotFoundError struct {
	Tenant, Thread string
	Reason         string
}

// Error implements error.
func (e *NotFoundError) Error() string {
	r := ""
	if e.Reason != "" {
		r = " (" + e.Reason + ")"
	}
	return fmt.Sprintf("client: thread %s/%s not found%s", e.Tenant, e.Thread, r)
}

// Unwrap returns [ErrThreadNotFound].
func (e *NotFoundError) Unwrap() error { return ErrThreadNotFound }
