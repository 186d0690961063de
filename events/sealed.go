package events

import (
	"encoding/binary"
	"fmt"
)

// Sealed payloads: an event whose payload is encrypted with its thread's
// data key (package threadkey) carries, instead of the member "payload"
// (a map), the member "payload_sealed" (msgpack bin) holding the
// ciphertext of the payload map's msgpack bytes. Everything else of the
// envelope stays as [Marshal] writes it, in the clear, so subjects,
// headers, de-duplication, optimistic concurrency and the audit chain work
// without the key. schemas/README.md gives the byte format for other
// languages. This file only moves bytes between the two forms; the
// cryptography is threadkey's.

const (
	payloadKey       = "payload"
	payloadSealedKey = "payload_sealed"
)

// PayloadMember locates the payload member of an encoded event b (as
// [Marshal] or a foreign writer following schemas/ writes it): the
// envelope (Payload nil), the byte range [Start, End) of the whole member
// (key and value), the value's bytes, and whether the member is
// "payload_sealed" (Value is then the bin's content) or "payload" (Value
// is the map's bytes).
type PayloadMember struct {
	Envelope   Event
	Start, End int
	Value      []byte
	Sealed     bool
}

// LocatePayload returns b's payload member. Errors wrap [ErrDecode]: b
// does not start with a msgpack map with string keys, has neither or both
// of the two members, or a "payload_sealed" that is not a bin. It reads
// the envelope once, without the whole-value check of [Unmarshal] (which
// the reader that decodes the result runs): the reader checks every bound
// and nesting depth, so it never panics, and it does not copy b (Value
// aliases it). It is on every sealed event's path (threadkey).
func LocatePayload(b []byte) (PayloadMember, error) { return locatePayload(b, false) }

// LocatePayloadNoCopy is [LocatePayload] without copying the envelope's
// strings (ID, Tenant, Thread) out of b: they share b's memory, as
// [UnmarshalNoCopy]'s do, which saves three allocations per sealed or
// opened event. b must not be modified while the result or a string taken
// from it is in use; keep a copy of a string that outlives that
// (strings.Clone). Same results and errors as LocatePayload.
func LocatePayloadNoCopy(b []byte) (PayloadMember, error) { return locatePayload(b, true) }

// locatePayload is LocatePayload, with alias LocatePayloadNoCopy.
func locatePayload(b []byte, alias bool) (PayloadMember, error) {
	var pm PayloadMember
	r := reader{b: b, alias: alias}
	n, ok := r.mapHeader()
	if !ok {
		return pm, fmt.Errorf("%w: an event is a msgpack map", ErrDecode)
	}
	found := 0
	for range n {
		start := r.i
		k, ok := r.strBytes()
		if !ok {
			return pm, fmt.Errorf("%w: envelope key at byte %d is not a string", ErrDecode, start)
		}
		switch string(k) {
		case "id":
			pm.Envelope.ID, ok = r.str()
		case "type":
			var t []byte
			t, ok = r.strBytes()
			pm.Envelope.Type = typeOf(t)
		case "tenant":
			pm.Envelope.Tenant, ok = r.str()
		case "thread":
			pm.Envelope.Thread, ok = r.str()
		case payloadKey:
			vstart := r.i
			ok = r.skip(0)
			pm.Start, pm.End, pm.Value, pm.Sealed = start, r.i, b[vstart:r.i], false
			found++
		case payloadSealedKey:
			var v []byte
			v, ok = r.binBytes()
			pm.Start, pm.End, pm.Value, pm.Sealed = start, r.i, v, true
			found++
		default:
			ok = r.skip(0)
		}
		if !ok {
			return pm, fmt.Errorf("%w: envelope member %q at byte %d", ErrDecode, k, start)
		}
	}
	if found != 1 {
		return pm, fmt.Errorf("%w: event %s has %d payload members (want one of payload, payload_sealed)", ErrDecode, pm.Envelope.ID, found)
	}
	return pm, nil
}

// ReplacePayload returns a copy of b (located by pm) whose payload member
// is replaced: by "payload_sealed" holding value as a bin when sealed, or
// by "payload" whose value is the msgpack map value. The member keeps its
// place, so the map's length is unchanged.
func ReplacePayload(b []byte, pm PayloadMember, value []byte, sealed bool) []byte {
	out := make([]byte, 0, len(b)-(pm.End-pm.Start)+len(value)+len(payloadSealedKey)+6)
	out = append(out, b[:pm.Start]...)
	if sealed {
		out = append(out, 0xa0|byte(len(payloadSealedKey)))
		out = append(out, payloadSealedKey...)
		switch n := len(value); {
		case n < 1<<8:
			out = append(out, 0xc4, byte(n))
		case n < 1<<16:
			out = append(out, 0xc5)
			out = binary.BigEndian.AppendUint16(out, uint16(n))
		default:
			out = append(out, 0xc6)
			out = binary.BigEndian.AppendUint32(out, uint32(n))
		}
	} else {
		out = append(out, 0xa0|byte(len(payloadKey)))
		out = append(out, payloadKey...)
	}
	out = append(out, value...)
	return append(out, b[pm.End:]...)
}

// binBytes reads a msgpack bin (bin8, bin16 or bin32) and returns its
// content, aliasing r.b.
func (r *reader) binBytes() ([]byte, bool) {
	if r.i >= len(r.b) {
		return nil, false
	}
	c := r.b[r.i]
	r.i++
	var n int
	var ok bool
	switch c {
	case 0xc4:
		n, ok = r.length(1)
	case 0xc5:
		n, ok = r.length(2)
	case 0xc6:
		n, ok = r.length(4)
	default:
		return nil, false
	}
	if !ok || n > len(r.b)-r.i {
		return nil, false
	}
	v := r.b[r.i : r.i+n]
	r.i += n
	return v, true
}
