package events

import (
	"errors"
	"fmt"
)

// Sentinel errors of package events. Match with errors.Is.
var (
	// ErrInvalid is wrapped by every *ValidationError.
	ErrInvalid = errors.New("events: invalid event")
	// ErrDecode is returned (wrapped) when bytes are not a well-formed event.
	ErrDecode = errors.New("events: cannot decode event")
	// ErrUnknownType is returned (wrapped) when an event's type is not one this
	// version of convlog knows. The envelope is still returned by Unmarshal.
	ErrUnknownType = errors.New("events: unknown event type")
	// ErrNewerSchema is returned (wrapped) when an event's schema version is
	// newer than [SchemaVersion]. The envelope is still returned by Unmarshal.
	ErrNewerSchema = errors.New("events: newer schema version")
	// ErrSealed is returned (wrapped) when an event's payload is sealed
	// (encrypted with its thread's data key, member "payload_sealed"; see
	// schemas/README.md) and was not opened: the reader has no access to
	// the key, or the key was destroyed by an erasure or redaction. The
	// envelope is still returned by Unmarshal.
	ErrSealed = errors.New("events: sealed payload")
	// ErrInvalidID is wrapped by errors about tenant, thread and event ids.
	ErrInvalidID = errors.New("events: invalid id")
)

// ValidationError names what is wrong with one event: the event id (if
// known), its type, the field path (e.g. "payload.tool_calls[2].arguments")
// and the reason. It wraps [ErrInvalid].
type ValidationError struct {
	EventID string
	Type    Type
	Field   string
	Reason  string
}

// Error implements error.
func (e *ValidationError) Error() string {
	id := e.EventID
	if id == "" {
		id = "<no id>"
	}
	return fmt.Sprintf("events: invalid %s event %s: %s: %s", e.Type, id, e.Field, e.Reason)
}

// Unwrap returns [ErrInvalid].
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// IDError names a bad tenant, thread or other id and the offending character.
// It wraps [ErrInvalidID].
type IDError struct {
	Kind   string // "tenant", "thread", "event id", ...
	ID     string
	Reason string
}

// Error implements error.
func (e *IDError) Error() string {
	return fmt.Sprintf("events: invalid %s %q: %s", e.Kind, e.ID, e.Reason)
}

// Unwrap returns [ErrInvalidID].
func (e *IDError) Unwrap() error { return ErrInvalidID }
