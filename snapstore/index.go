package snapstore

import (
	"bytes"
	"fmt"
	"time"

	"github.com/convlog/convlog/fold"
	"github.com/vmihailenco/msgpack/v5"
)

// Summary is the index entry of one thread: the value at
// [IndexKey](tenant, thread) in the index bucket (default
// "convlog_threads"), encoded as one msgpack map with the field names
// below. The projector writes it after every projection of the thread that
// changes it, never moving it backwards (compare-and-swap on the entry,
// keeping the higher Version), and deletes it when the thread is erased.
// Soft-deleted threads keep their entry with Deleted set, so List can
// filter them out or show them.
type Summary struct {
	Tenant   string            `msgpack:"tenant" json:"tenant"`
	Thread   string            `msgpack:"thread" json:"thread"`
	Owner    string            `msgpack:"owner,omitempty" json:"owner,omitempty"`
	Agent    string            `msgpack:"agent,omitempty" json:"agent,omitempty"`
	Title    string            `msgpack:"title,omitempty" json:"title,omitempty"`
	Metadata map[string]string `msgpack:"metadata,omitempty" json:"metadata,omitempty"`
	// CreatedAt and UpdatedAt are event times (UTC) of the thread's first
	// and last applied event.
	CreatedAt time.Time `msgpack:"created_at" json:"created_at"`
	UpdatedAt time.Time `msgpack:"updated_at" json:"updated_at"`
	// Version is the thread version (stream sequence of its last event).
	Version uint64 `msgpack:"version" json:"version"`
	// Messages is the number of messages in the history.
	Messages int `msgpack:"messages" json:"messages"`
	// Pending is the number of tool calls awaiting a result.
	Pending int `msgpack:"pending,omitempty" json:"pending,omitempty"`
	// Rejected counts the thread's rejected events.
	Rejected uint64 `msgpack:"rejected,omitempty" json:"rejected,omitempty"`
	// Deleted is true while the thread is soft-deleted.
	Deleted    bool          `msgpack:"deleted,omitempty" json:"deleted,omitempty"`
	ForkedFrom *fold.ForkRef `msgpack:"forked_from,omitempty" json:"forked_from,omitempty"`
	// ExternalID is the framework id the thread was created under
	// (fold.State.ExternalID); "" for a thread created under its own id.
	ExternalID string `msgpack:"external_id,omitempty" json:"external_id,omitempty"`
}

// SummaryOf returns the index entry for a projected state.
func SummaryOf(s *fold.State) Summary {
	return Summary{Tenant: s.Tenant, Thread: s.Thread, Owner: s.Owner, Agent: s.Agent, Title: s.Title,
		Metadata: s.Metadata, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, Version: s.Version,
		Messages: s.MessageCount(), Pending: len(s.Pending), Rejected: s.RejectedCount, Deleted: s.Deleted,
		ForkedFrom: s.ForkedFrom, ExternalID: s.ExternalID}
}

// MarshalSummary encodes s as stored in the index bucket: the bytes
// msgpack.Marshal(&s) gives (a map of the fields in declaration order,
// omitempty fields left out when empty), written field by field. The
// reflection encoder boxes every omitempty field to test it for
// emptiness, an allocation each, and the projector writes a summary on
// every step.
func MarshalSummary(s Summary) ([]byte, error) {
	omit := [...]bool{s.Owner == "", s.Agent == "", s.Title == "", len(s.Metadata) == 0, s.Pending == 0,
		s.Rejected == 0, !s.Deleted, s.ForkedFrom == nil, s.ExternalID == ""}
	n := 15
	for _, o := range omit {
		if o {
			n--
		}
	}
	var buf bytes.Buffer
	buf.Grow(summaryBaseSize + len(s.Tenant) + len(s.Thread) + len(s.Owner) + len(s.Agent) + len(s.Title) + len(s.ExternalID))
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	w := mapWriter{enc: enc}
	w.mapLen(n)
	w.str("tenant", s.Tenant)
	w.str("thread", s.Thread)
	w.strUnless(omit[0], "owner", s.Owner)
	w.strUnless(omit[1], "agent", s.Agent)
	w.strUnless(omit[2], "title", s.Title)
	w.valueUnless(omit[3], "metadata", s.Metadata)
	w.time("created_at", s.CreatedAt)
	w.time("updated_at", s.UpdatedAt)
	w.key("version")
	w.do(enc.EncodeUint64(s.Version)) // a uint64 field: 9 bytes, as reflection writes it
	w.key("messages")
	w.do(enc.EncodeInt(int64(s.Messages)))
	if !omit[4] {
		w.key("pending")
		w.do(enc.EncodeInt(int64(s.Pending)))
	}
	if !omit[5] {
		w.key("rejected")
		w.do(enc.EncodeUint64(s.Rejected))
	}
	if !omit[6] {
		w.key("deleted")
		w.do(enc.EncodeBool(s.Deleted))
	}
	w.valueUnless(omit[7], "forked_from", s.ForkedFrom)
	w.strUnless(omit[8], "external_id", s.ExternalID)
	if w.err != nil {
		return nil, w.err
	}
	return buf.Bytes(), nil
}

// summaryBaseSize is about the encoded size of a summary besides its
// strings: field names, times and numbers.
const summaryBaseSize = 192

// UnmarshalSummary decodes an index bucket value. It returns an error
// wrapping [ErrCorrupt] when b is not a summary.
func UnmarshalSummary(b []byte) (Summary, error) {
	var s Summary
	if err := msgpack.Unmarshal(b, &s); err != nil {
		return Summary{}, fmt.Errorf("%w: thread summary: %v", ErrCorrupt, err)
	}
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	return s, nil
}

// indexed reports whether a state gets an index entry: it exists and is
// not erased.
func indexed(s *fold.State) bool { return s.Exists && !s.Erased }
