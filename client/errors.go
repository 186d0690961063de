package client

import (
	"errors"
	"fmt"

	"github.com/convlog/convlog/internal/quota"
)

// Sentinel errors of package client. Match with errors.Is.
var (
	// ErrConflict: the thread's version is not the one the writer expected
	// (docs/design.md invariant 3). Not retryable as is: reload, re-decide, retry
	// with the new version. Returned wrapped in *ConflictError.
	ErrConflict = errors.New("client: version conflict")
	// ErrThreadNotFound: the thread has no events, or was erased.
	ErrThreadNotFound = errors.New("client: thread not found")
	// ErrThreadErased: the thread was erased (its events purged; the
	// erasure marker remains). Returned wrapped in *NotFoundError.
	ErrThreadErased = errors.New("client: thread erased")
	// ErrThreadDeleted: the thread is soft-deleted (read it with
	// IncludeDeleted). Returned wrapped in *NotFoundError.
	ErrThreadDeleted = errors.New("client: thread deleted")
	// ErrThreadExists: CreateThread for an id that already has events.
	ErrThreadExists = errors.New("client: thread already exists")
	// ErrTooLarge: an event (or a turn) is larger than the server accepts.
	// Returned wrapped in *TooLargeError.
	ErrTooLarge = errors.New("client: event too large")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client: closed")
	// ErrQuotaExceeded: an append was refused because its tenant is over
	// its storage or rate limit (agentd serve --quota-file; package
	// quota). The error is a *[QuotaError] saying which.
	ErrQuotaExceeded = quota.ErrExceeded
	// ErrTenantScoped: a tenant-scoped client (Config.Tenant) was asked
	// for what its NATS user may not do (erase, redact, blobs, durable
	// consumers): do it through the HTTP API, whose keys are per tenant.
	ErrTenantScoped = errors.New("client: not permitted to a tenant-scoped client")
	// ErrInvalidAppend: an Append call that cannot be made as written (no
	// version option, no events, more events than commit atomically). A
	// programming error: not retryable.
	ErrInvalidAppend = errors.New("client: invalid append")
	// ErrIdempotencyMismatch: an event id (or an HTTP Idempotency-Key,
	// which derives the ids) was reused with a different event. Returned
	// wrapped in *IdempotencyMismatchError.
	ErrIdempotencyMismatch = errors.New("client: event id reused with a different event")
	// ErrStorageFull: the server refused an append for lack of storage
	// (JetStream 10023, 10047); nothing of it was stored (the server
	// answered, so the outcome is known). Not retried within the call:
	// retry after space is freed or limits raised. A server whose disk is
	// full and that does not answer at all (nats-server's file store stops
	// answering after a "no space left on device" write error) surfaces as
	// a timeout instead; agentd tells that case apart from its embedded
	// server's state.
	ErrStorageFull = errors.New("client: the server has no storage left for the append")
	// ErrOverloaded: the server did not take an append now, on every
	// attempt the call made: it refused it as busy (10167 too many
	// requests, 10210/10211 too many batches in flight, any other 429 or
	// 503 answer) or its stream had no leader to answer (no responders),
	// until Config.MaxRetries was spent or ctx ended. Retryable: send the
	// same events again after a backoff (the event ids make that safe).
	// The refused attempts stored nothing; the error says so, or says the
	// outcome is unknown when an earlier attempt of the call timed out.
	ErrOverloaded = errors.New("client: the server is overloaded")
	// ErrBadCursor: a List cursor that List did not produce.
	ErrBadCursor = errors.New("client: bad list cursor")
	// ErrBadConvKey: an unusable conversation key, agent or user. Returned
	// wrapped in *ConvKeyError.
	ErrBadConvKey = errors.New("client: bad conversation key")
	// ErrStateKeyExists: SetStateIfAbsent found the key set already.
	ErrStateKeyExists = errors.New("client: state key already set")
)

// ConflictError says which version the writer expected and which the thread
// has. Actual is 0 when the server did not say (error 10164 on replicated
// streams) and the thread could not be read. It wraps [ErrConflict] and,
// when the server answered the conflict, Cause.
type ConflictError struct {
	Tenant, Thread string
	Expected       uint64
	Actual         uint64
	// Cause is the server's *jetstream.APIError (10071 wrong last
	// sequence, 10164, 10201) when the server refused the publish; nil
	// when the conflict was seen on a read before publishing.
	Cause error
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("client: thread %s/%s: version conflict: expected version %d, thread is at %d; reload the thread and retry with the new version",
		e.Tenant, e.Thread, e.Expected, e.Actual)
}

// Unwrap returns [ErrConflict] and Cause (when set).
func (e *ConflictError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrConflict}
	}
	return []error{ErrConflict, e.Cause}
}

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

// NotFoundError names the missing thread. It wraps [ErrThreadNotFound],
// and Cause when set ([ErrThreadErased], [ErrThreadDeleted]): match those
// with errors.Is, not Reason, which is prose.
type NotFoundError struct {
	Tenant, Thread string
	Reason         string
	// Cause says why a thread that has events is not found: ErrThreadErased
	// or ErrThreadDeleted; nil when it has no events.
	Cause error
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
func (e *NotFoundError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrThreadNotFound}
	}
	return []error{ErrThreadNotFound, e.Cause}
}

// QuotaError says which limit of which tenant an append would exceed:
// Kind "storage" (Used and Limit in stored bytes) or "rate" (events in
// one second of stored time, and RetryAfter). It wraps ErrQuotaExceeded.
type QuotaError = quota.Error
