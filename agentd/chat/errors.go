package chat

import (
	"errors"
	"fmt"
)

// Code says why a turn was refused or could not finish. The values are the
// problem slugs agentd/httpapi answers with.
type Code string

// Codes of [Error].
const (
	// CodeInvalid: the request's messages cannot make a turn (nothing new
	// to answer, the last message is not answerable, no user message).
	CodeInvalid Code = "invalid-request"
	// CodeHistoryDiverged: the request's history does not continue the
	// thread's (divergence policy, rule 4).
	CodeHistoryDiverged Code = "history-diverged"
	// CodeErased: the conversation's thread was erased.
	CodeErased Code = "conversation-erased"
	// CodeDeleted: the conversation's thread is soft-deleted.
	CodeDeleted Code = "conversation-deleted"
	// CodeRepliesOff: the thread takes no replies.
	CodeRepliesOff Code = "replies-off"
	// CodeAgentMismatch: the thread is answered by another agent.
	CodeAgentMismatch Code = "agent-mismatch"
	// CodeSuperseded: a newer user message arrived before the answer.
	CodeSuperseded Code = "superseded"
	// CodeInterrupted: the thread was reset, restored, deleted or erased
	// before the answer.
	CodeInterrupted Code = "interrupted"
)

// Error is a turn the service refused or could not finish, with what an
// API needs to say where: the request field and message position, and the
// thread sequence it concerns.
type Error struct {
	Code Code
	// Thread is the conversation's thread.
	Thread string
	// Field is the request field at fault ("messages[2].role",
	// "messages"), "" when none.
	Field string
	// Index is the position of the request message at fault, -1 when none.
	Index int
	// Seq is the thread sequence compared with, 0 when none.
	Seq uint64
	// Version is the thread's version, when the client needs it to fork.
	Version *uint64
	// Detail says what happened and what to do, in one sentence or two.
	Detail string
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("chat: %s: %s", e.Code, e.Detail) }

// AppendError is the failure of the turn's append: Err as the client
// returned it, and EventIndex, which maps the ids of the turn's events to
// the positions of the request messages they came from (so an API can
// name the message a validation error is about).
type AppendError struct {
	Err        error
	EventIndex map[string]int
}

// Error implements error.
func (e *AppendError) Error() string { return "chat: append: " + e.Err.Error() }

// Unwrap returns Err.
func (e *AppendError) Unwrap() error { return e.Err }

func newError(code Code, thread, detail string) *Error {
	return &Error{Code: code, Thread: thread, Index: -1, Detail: detail}
}

func invalid(thread, field, detail string) *Error {
	e := newError(CodeInvalid, thread, detail)
	e.Field = field
	return e
}

// IsCode reports whether err is (or wraps) an *Error with code c.
func IsCode(err error, c Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == c
}
