package fold

import (
	"errors"
	"fmt"
)

// Code classifies why the fold rejected an event.
type Code string

// Rejection codes.
const (
	CodeUndecodable     Code = "undecodable"           // bytes are not an event
	CodeUnknownType     Code = "unknown_type"          // type this version does not know
	CodeNewerSchema     Code = "newer_schema"          // schema version newer than this fold reads
	CodeInvalid         Code = "invalid"               // fails events.Validate
	CodeWrongThread     Code = "wrong_thread"          // envelope tenant/thread differ from the subject
	CodeNoThread        Code = "no_thread"             // event before thread.created
	CodeAlreadyExists   Code = "already_exists"        // second thread.created / thread.forked
	CodeDeleted         Code = "deleted"               // thread is soft-deleted
	CodeErased          Code = "erased"                // thread was erased
	CodeErasureNotFirst Code = "erasure_not_first"     // erasure marker after events still stored (forged)
	CodeNotPending      Code = "tool_call_not_pending" // result for a call that is not pending
	CodePendingCalls    Code = "tool_calls_pending"    // message while calls are pending (policy reject)
	CodeDuplicateCallID Code = "duplicate_call_id"     // new call reuses an id that is still pending
	CodeInvalidHistory  Code = "invalid_history"       // restore/fork/compaction would break the history
	CodeTooLarge        Code = "too_large"             // the thread's state would exceed MaxStateBytes
)

// ErrRejected is wrapped by every *RejectionError.
var ErrRejected = errors.New("fold: event rejected")

// ErrNeedHistory is returned by [Apply] when the event needs messages that
// are not in a windowed State (a compaction that cuts before the window).
// The caller loads the full history into the State and applies again.
var ErrNeedHistory = errors.New("fold: event needs the full history")

// ErrNeedParent is returned by [Apply] for a fork by reference
// (events.Forked with ByReference) that can be applied: its history and
// state are the source's as of the fork's source sequence, which the fold
// does not read. s is unchanged; the caller reads the source's thread as
// of that sequence and calls [ApplyFork].
var ErrNeedParent = errors.New("fold: a fork by reference needs its source's state")

// RejectionError is the verdict of the fold on one event. It wraps
// [ErrRejected]; Rejection says which event and why.
type RejectionError struct {
	Tenant, Thread string
	Rejection
}

// Error implements error.
func (e *RejectionError) Error() string {
	return fmt.Sprintf("fold: thread %s/%s: event %s (%s) at seq %d rejected: %s: %s",
		e.Tenant, e.Thread, e.EventID, e.Type, e.Seq, e.Code, e.Reason)
}

// Unwrap returns [ErrRejected].
func (e *RejectionError) Unwrap() error { return ErrRejected }
