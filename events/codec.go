package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// NATS headers convlog sets on every event message. Consumers can filter on
// them without decoding the body.
const (
	// HeaderType carries the event [Type].
	HeaderType = "Convlog-Type"
	// HeaderSchema carries the schema version as a decimal string.
	HeaderSchema = "Convlog-Schema"
	// HeaderMsgID is the NATS de-duplication header; convlog sets it to the
	// event id. Source: NATS JetStream headers (Nats-Msg-Id).
	HeaderMsgID = "Nats-Msg-Id"
)

// wire is the msgpack and JSON shape of an event.
type wire struct {
	ID            string    `msgpack:"id" json:"id"`
	Type          Type      `msgpack:"type" json:"type"`
	Tenant        string    `msgpack:"tenant" json:"tenant"`
	Thread        string    `msgpack:"thread" json:"thread"`
	Time          time.Time `msgpack:"time" json:"time"`
	Producer      string    `msgpack:"producer" json:"producer"`
	CausationID   string    `msgpack:"causation_id,omitempty" json:"causation_id,omitempty"`
	CorrelationID string    `msgpack:"correlation_id,omitempty" json:"correlation_id,omitempty"`
	SchemaVersion int       `msgpack:"v" json:"v"`
}

type wireMsgpack struct {
	wire
	Payload       msgpack.RawMessage `msgpack:"payload"`
	PayloadSealed []byte             `msgpack:"payload_sealed,omitempty"`
}

type wireJSON struct {
	wire
	Payload jsonText `json:"payload"`
}

func (e Event) wire() wire {
	return wire{ID: e.ID, Type: e.Type, Tenant: e.Tenant, Thread: e.Thread, Time: e.Time.UTC(),
		Producer: e.Producer, CausationID: e.CausationID, CorrelationID: e.CorrelationID,
		SchemaVersion: e.SchemaVersion}
}

func (w wire) event() Event {
	return Event{ID: w.ID, Type: w.Type, Tenant: w.Tenant, Thread: w.Thread, Time: w.Time.UTC(),
		Producer: w.Producer, CausationID: w.CausationID, CorrelationID: w.CorrelationID,
		SchemaVersion: w.SchemaVersion}
}

// encodeMsgpack encodes v deterministically (map keys sorted, struct fields
// in declaration order).
func encodeMsgpack(v any) ([]byte, error) {
	w := getWriter()
	defer putWriter(w)
	if err := w.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(w.buf.Bytes()), nil
}

// msgpackWriter is a pooled buffer and encoder configured as encodeMsgpack
// needs (sorted map keys, compact integers).
type msgpackWriter struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

var writers = sync.Pool{New: func() any {
	w := &msgpackWriter{}
	w.enc = msgpack.NewEncoder(&w.buf)
	w.enc.SetSortMapKeys(true)
	w.enc.UseCompactInts(true)
	return w
}}

func getWriter() *msgpackWriter { return writers.Get().(*msgpackWriter) }

// maxPooledBuffer is the largest buffer returned to the pool: the rare
// large event (a restore, a big tool output) must not pin its buffer.
const maxPooledBuffer = 64 << 10

func putWriter(w *msgpackWriter) {
	if w.buf.Cap() > maxPooledBuffer {
		return
	}
	w.buf.Reset()
	writers.Put(w)
}

// Marshal encodes e as one msgpack map: the envelope fields and "payload",
// a nested map. The encoding is deterministic (golden vectors in schemas/
// pin it). Marshal does not validate; call [Event.Validate] first.
// It returns an error only when the payload is nil or cannot be encoded.
// Safe for concurrent use.
func Marshal(e Event) ([]byte, error) { return MarshalAppend(nil, e) }

// MarshalAppend appends the encoding of e ([Marshal]'s bytes) to dst and
// returns the extended slice, so that a caller whose encoding lives only
// briefly (sealed at once into a new buffer) can reuse one buffer. Errors
// as Marshal's; dst is then returned unchanged. Safe for concurrent use
// (on different dst).
func MarshalAppend(dst []byte, e Event) ([]byte, error) {
	out, _, err := marshalAppend(dst, e)
	return out, err
}

// MarshalAppendLocated is [MarshalAppend] that also returns the payload
// member of the encoding it appended, as [LocatePayloadNoCopy] of
// out[len(dst):] returns it, with Start and End offsets into out (not into
// the appended part): so a caller that seals the event at once
// (threadkey's Keys.SealLocated) need not walk the envelope again. The
// envelope's strings are e's own (Payload nil), Value aliases out. Errors
// as Marshal's; dst is then returned unchanged with a zero PayloadMember.
// Safe for concurrent use (on different dst).
func MarshalAppendLocated(dst []byte, e Event) (out []byte, pm PayloadMember, err error) {
	out, start, err := marshalAppend(dst, e)
	if err != nil {
		return out, pm, err
	}
	pm.Envelope = Event{ID: e.ID, Type: e.Type, Tenant: e.Tenant, Thread: e.Thread}
	pm.Start, pm.End = start, len(out)
	pm.Value = out[start+1+len(payloadKey) : len(out) : len(out)]
	return out, pm, nil
}

// marshalAppend is MarshalAppend; start is the offset in out of the
// member "payload" (its key), the encoding's last member.
func marshalAppend(dst []byte, e Event) (out []byte, start int, err error) {
	if e.Payload == nil {
		return dst, 0, fmt.Errorf("events: marshal event %s: nil payload", e.ID)
	}
	w := getWriter()
	defer putWriter(w)
	// The envelope is written by hand, field for field as msgpack encodes
	// wireMsgpack (a map, fields in declaration order, omitempty ones left
	// out; the golden vectors check it), then the payload straight after its
	// key (encodePayload: the common types without reflection): one pass, no
	// intermediate copy.
	enc := w.enc
	n := 8
	if e.CausationID != "" {
		n++
	}
	if e.CorrelationID != "" {
		n++
	}
	_ = enc.EncodeMapLen(n)
	str := func(k, v string) {
		_ = enc.EncodeString(k)
		_ = enc.EncodeString(v)
	}
	str("id", e.ID)
	str("type", string(e.Type))
	str("tenant", e.Tenant)
	str("thread", e.Thread)
	_ = enc.EncodeString("time")
	_ = enc.EncodeTime(e.Time.UTC())
	str("producer", e.Producer)
	if e.CausationID != "" {
		str("causation_id", e.CausationID)
	}
	if e.CorrelationID != "" {
		str("correlation_id", e.CorrelationID)
	}
	_ = enc.EncodeString("v")
	_ = enc.EncodeInt(int64(e.SchemaVersion))
	start = len(dst) + w.buf.Len()
	_ = enc.EncodeString(payloadKey)
	if err := encodePayload(enc, e.Payload); err != nil {
		return dst, 0, fmt.Errorf("events: marshal %s payload of event %s: %w", e.Type, e.ID, err)
	}
	return append(dst, w.buf.Bytes()...), start, nil
}

// Unmarshal decodes msgpack bytes written by [Marshal]. b must hold exactly
// one event (trailing bytes are an error).
//
// The decoded event is canonical: message times are UTC, and empty maps,
// tool call lists and raw JSON values (which Marshal omits) are nil, so
// Marshal of the result gives the bytes a second Unmarshal reads back equal.
//
// Errors: [ErrDecode] (wrapped) when b is not an event; [ErrNewerSchema] or
// [ErrUnknownType] (wrapped) when the envelope decodes but the payload cannot
// be understood by this version, in which case the returned Event still
// carries the envelope (with a nil Payload) so the fold can record which
// event it rejected. Unmarshal never panics.
//
// A hand-written decoder (decode.go) reads the forms [Marshal] writes; any
// other input goes to the reflection decoder, which defines the result:
// both give the same Event and the same error for every input. Safe for
// concurrent use; the returned event shares no memory with b.
func Unmarshal(b []byte) (Event, error) { return unmarshal(b, false) }

// UnmarshalNoCopy is [Unmarshal] without copying the strings of the event
// out of b: the ones the hand-written decoder reads (the envelope's, and
// the text of messages, contents and tool calls) share b's memory, which
// saves an allocation and a copy per string (a replay's fold reads many).
// b must never be modified afterwards, for as long as the event or
// anything taken from it (a folded message) is reachable; a buffer
// nats.go hands out with a message is such a buffer (it copies every
// message's bytes into a slice of its own). Same results and errors as
// Unmarshal; safe for concurrent use.
func UnmarshalNoCopy(b []byte) (Event, error) { return unmarshal(b, true) }

// unmarshal is Unmarshal, with alias UnmarshalNoCopy.
//
// The hand-written decoder runs first, on the unchecked bytes: it checks
// on its own what checkWire checks (every length within b, nesting at
// most maxNesting deep, nothing after the event), and FuzzDecodeFast
// holds it to accepting nothing the checked reflection path rejects.
// checkWire guards the reflection decoder only, so the common event is
// not walked twice (a walk of the bytes is a sizable part of a fold's
// time).
func unmarshal(b []byte, alias bool) (Event, error) {
	if e, ok := decodeFast(b, alias); ok {
		return e, nil
	}
	if err := checkWire(b); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	return decodeReflect(b)
}

// unmarshalReflect is Unmarshal without the hand-written decoder: the
// reference the tests compare it with.
func unmarshalReflect(b []byte) (Event, error) {
	if err := checkWire(b); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	return decodeReflect(b)
}

// decodeReflect decodes b (which passed checkWire) with msgpack/v5's
// reflection decoder.
func decodeReflect(b []byte) (Event, error) {
	var w wireMsgpack
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	if err := noPanic(func() error { return dec.Decode(&w) }); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	e := w.wire.event()
	if e.SchemaVersion > SchemaVersion {
		return e, fmt.Errorf("%w: event %s has schema version %d, this convlog reads up to %d", ErrNewerSchema, e.ID, e.SchemaVersion, SchemaVersion)
	}
	p := newPayload(e.Type)
	if p == nil {
		return e, fmt.Errorf("%w: %q (event %s)", ErrUnknownType, e.Type, e.ID)
	}
	if len(w.Payload) == 0 && w.PayloadSealed != nil {
		return e, fmt.Errorf("%w: event %s (%s) is encrypted with its thread's data key, which this reader does not have or which was destroyed", ErrSealed, e.ID, e.Type)
	}
	if len(w.Payload) == 0 {
		return e, fmt.Errorf("%w: event %s has no payload", ErrDecode, e.ID)
	}
	if err := noPanic(func() error { return msgpack.Unmarshal(w.Payload, p) }); err != nil {
		return e, fmt.Errorf("%w: %s payload of event %s: %v", ErrDecode, e.Type, e.ID, err)
	}
	e.Payload = canonical(p)
	return e, nil
}

// noPanic runs a msgpack/v5 decode and turns a panic into an error.
// msgpack/v5 v5.4.1 panics on a nil where a time.Time is expected
// (decodeNilValue calls reflect.Value.IsNil on the struct), which a
// foreign writer's event can hold; Unmarshal must reject such an event,
// not take the projector down.
func noPanic(decode func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("msgpack decoder panicked: %v", r)
		}
	}()
	return decode()
}

// MarshalJSON encodes e in the JSON form described by schemas/envelope.json:
// the envelope fields and "payload". Time is RFC 3339 with nanoseconds.
func (e Event) MarshalJSON() ([]byte, error) {
	if e.Payload == nil {
		return nil, fmt.Errorf("events: marshal event %s: nil payload", e.ID)
	}
	p, err := marshalJSONNoEscape(e.Payload)
	if err != nil {
		return nil, err
	}
	return marshalJSONNoEscape(wireJSON{wire: e.wire(), Payload: p})
}

// UnmarshalJSON decodes the JSON form. Errors are as for [Unmarshal], and the
// decoded event is canonical in the same way.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w wireJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("%w: %w", ErrDecode, err)
	}
	*e = w.wire.event()
	if e.SchemaVersion > SchemaVersion {
		return fmt.Errorf("%w: event %s has schema version %d, this convlog reads up to %d", ErrNewerSchema, e.ID, e.SchemaVersion, SchemaVersion)
	}
	p := newPayload(e.Type)
	if p == nil {
		return fmt.Errorf("%w: %q (event %s)", ErrUnknownType, e.Type, e.ID)
	}
	if len(w.Payload) == 0 || bytes.Equal(bytes.TrimSpace(w.Payload), []byte("null")) {
		return fmt.Errorf("%w: event %s has no payload", ErrDecode, e.ID)
	}
	if err := json.Unmarshal(w.Payload, p); err != nil {
		if e.ID == "" {
			return fmt.Errorf("%w: %s payload: %v", ErrDecode, e.Type, err)
		}
		return fmt.Errorf("%w: %s payload of event %s: %v", ErrDecode, e.Type, e.ID, err)
	}
	e.Payload = canonical(p)
	return nil
}

// UnmarshalJSONPayload decodes b, the JSON form of a payload of type t, as
// [Event.UnmarshalJSON] decodes an event's payload, canonical in the same
// way: for a reader that holds an event's envelope and payload apart.
// Errors wrap ErrUnknownType for a type this package does not know and
// ErrDecode for anything else, an empty or null b included.
func UnmarshalJSONPayload(t Type, b []byte) (Payload, error) {
	p := newPayload(t)
	if p == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, t)
	}
	if len(b) == 0 || bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil, fmt.Errorf("%w: no %s payload", ErrDecode, t)
	}
	if err := json.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("%w: %s payload: %v", ErrDecode, t, err)
	}
	return canonical(p), nil
}

// jsonText is JSON text as json.RawMessage is, except that it decodes to
// a slice of the decoder's input, not a copy: for a value decoded again
// before the input is returned to its owner (an event's payload inside
// Event.UnmarshalJSON).
type jsonText []byte

func (t *jsonText) UnmarshalJSON(b []byte) error { *t = b; return nil }

func (t jsonText) MarshalJSON() ([]byte, error) { return json.RawMessage(t).MarshalJSON() }

// deref turns the pointer newPayload returned into the payload value.
func deref(p Payload) Payload {
	if ti, ok := byType[p.EventType()]; ok {
		return ti.deref(p)
	}
	return p
}

// canonicalizer is implemented by the pointer types of the payloads whose
// decoded form has choices the wire does not record: fields that are
// omitted when empty (maps, tool call lists, raw JSON metadata) become nil
// when a decoder produced an empty non-nil value, and message times become
// UTC (msgpack decodes timestamps in the local zone, JSON in the written
// offset). Message lists of Restore and Forked are not touched: they are
// always encoded, so nil and empty stay distinct. The hand-written decoder
// calls canonicalize on the value it built, before boxing it (one
// allocation per event, not two); the reflection and JSON decoders through
// canonical.
type canonicalizer interface{ canonicalize() }

// canonical makes the pointer newPayload returned canonical and returns
// the payload value.
func canonical(p Payload) Payload {
	if c, ok := p.(canonicalizer); ok {
		c.canonicalize()
	}
	return deref(p)
}

func (v *ThreadCreated) canonicalize() { v.Metadata = nilIfEmptyMap(v.Metadata) }
func (v *ThreadUpdated) canonicalize() { v.Metadata = nilIfEmptyMap(v.Metadata) }
func (v *UserMessage) canonicalize()   { v.Metadata = nilIfEmpty(v.Metadata) }
func (v *AssistantMessage) canonicalize() {
	v.ToolCalls = nilIfEmpty(v.ToolCalls)
	v.Metadata = nilIfEmpty(v.Metadata)
}
func (v *Restore) canonicalize() { canonicalMessages(v.Messages) }
func (v *Forked) canonicalize() {
	v.Created.canonicalize()
	v.State = nilIfEmptyMap(v.State)
	canonicalMessages(v.Messages)
}
func (v *Redacted) canonicalize() { v.Fields = nilIfEmpty(v.Fields) }

// canonicalMessages fixes freshly decoded messages in place.
func canonicalMessages(ms []Message) {
	for i := range ms {
		m := &ms[i]
		m.ToolCalls = nilIfEmpty(m.ToolCalls)
		m.Metadata = nilIfEmpty(m.Metadata)
		m.Time = m.Time.UTC()
	}
}

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

func nilIfEmptyMap[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) == 0 {
		return nil
	}
	return m
}

// forkedWire is [Forked] as Marshal encodes it. msgpack's SetSortMapKeys
// sorts map[string]string and map[string]any but not
// map[string]json.RawMessage, so State goes through sortedRawMap to keep
// Marshal deterministic. The msgpack tags must match Forked's (a test
// compares them).
type forkedWire struct {
	SourceTenant string        `msgpack:"source_tenant"`
	SourceThread string        `msgpack:"source_thread"`
	SourceSeq    uint64        `msgpack:"source_seq"`
	Created      ThreadCreated `msgpack:"created"`
	Messages     []Message     `msgpack:"messages"`
	State        sortedRawMap  `msgpack:"state,omitempty"`
	ByReference  bool          `msgpack:"by_reference,omitempty"`
}

func forkedWireOf(f Forked) forkedWire {
	return forkedWire{SourceTenant: f.SourceTenant, SourceThread: f.SourceThread, SourceSeq: f.SourceSeq,
		Created: f.Created, Messages: f.Messages, State: sortedRawMap(f.State), ByReference: f.ByReference}
}

// sortedRawMap encodes as a msgpack map with keys in byte order, values as
// bin (nil as nil), which is what msgpack writes for the map, sorted.
type sortedRawMap map[string]json.RawMessage

var _ msgpack.CustomEncoder = sortedRawMap(nil)

func (m sortedRawMap) EncodeMsgpack(enc *msgpack.Encoder) error {
	if m == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeMapLen(len(m)); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := enc.EncodeString(k); err != nil {
			return err
		}
		if err := enc.EncodeBytes(m[k]); err != nil {
			return err
		}
	}
	return nil
}

// Headers returns the NATS headers for e as a plain map (this package does
// not import NATS): [HeaderType], [HeaderSchema] and [HeaderMsgID].
func Headers(e Event) map[string]string {
	return map[string]string{
		HeaderType:   string(e.Type),
		HeaderSchema: fmt.Sprint(e.SchemaVersion),
		HeaderMsgID:  e.ID,
	}
}
