package events

import (
	"time"

	"github.com/google/uuid"
)

// SchemaVersion is the envelope/payload schema version this package writes
// and the newest it reads. An event with a newer version decodes with
// [ErrNewerSchema] and is rejected by the fold.
const SchemaVersion = 1

// Event is the envelope of every convlog event.
//
// The stream sequence is not a field: JetStream assigns it on append and
// readers get it in [Stored]. Time is UTC with nanosecond precision.
type Event struct {
	// ID is chosen by the writer (UUIDv7, canonical lower-case form) and is
	// the de-duplication key (Nats-Msg-Id). A retry reuses it.
	ID string
	// Type names the payload type and equals Payload.EventType().
	Type Type
	// Tenant and Thread are the subject tokens the event is appended to.
	Tenant string
	Thread string
	// Time is when the writer created the event (UTC, ns).
	Time time.Time
	// Producer names the service or agent that wrote the event.
	Producer string
	// CausationID is the id of the event that caused this one (optional).
	CausationID string
	// CorrelationID groups events of one request or turn (optional).
	CorrelationID string
	// SchemaVersion is [SchemaVersion] for events this package creates.
	SchemaVersion int
	// Payload is the typed body; nil only for an event of unknown type.
	Payload Payload
}

// New returns an event for payload p on tenant/thread with a fresh UUIDv7
// id, the current UTC time, producer and the current schema version. It does
// not validate; see [Event.Validate].
func New(tenant, thread, producer string, p Payload) Event {
	return Event{
		ID:            NewID(),
		Type:          p.EventType(),
		Tenant:        tenant,
		Thread:        thread,
		Time:          time.Now().UTC(),
		Producer:      producer,
		SchemaVersion: SchemaVersion,
		Payload:       p,
	}
}

// NewID returns a new UUIDv7 in canonical form. It panics only if the
// system's random source fails, as uuid.Must does.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// Stored is an event as read back from the log: the event, the stream
// sequence JetStream assigned it, and the server's store time.
type Stored struct {
	Event
	// Seq is the stream sequence (the thread version after this event).
	Seq uint64
	// StoredAt is the server's timestamp for the message (UTC).
	StoredAt time.Time
}
