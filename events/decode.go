package events

import (
	"encoding/binary"
	"encoding/json"
	"time"
	"unsafe"
)

// This file is the hand-written msgpack decoder behind [Unmarshal]: the
// envelope and every payload type, without reflection. The switches over
// the event types and the reader of each payload type (reader.read<T>: a
// case per msgpack key, calling the reader of the field's Go type below)
// are generated from the registry into decode_gen.go. Messages, contents,
// tool calls and usage (in any payload) are read by the message-list codec
// (msgcodec.go), the one decoder of [Message] and its parts, in its strict
// mode.
//
// It is a fast path, not a second definition of the wire format. It
// accepts only the forms it decodes exactly as the reflection decoder
// (msgpack/v5 decoding wireMsgpack and the payload struct) does, and
// reports !ok for anything else: a value of an unexpected msgpack type, a
// field given twice, a map key that is not a str, a newer schema version,
// an unknown event type, a payload that is not a map. Unmarshal then runs
// the reflection decoder, which gives today's result or today's error. So
// every input decodes exactly as before; the fast path only has to be
// right when it says ok, and a differential test and a fuzz test
// (decode_test.go) hold it to that.
//
// Rules it copies from msgpack/v5 v5.4.1 (decode*.go), for the forms it
// accepts:
//   - A struct is a map; unknown keys are skipped; nil for a string or
//     number field is rejected here (msgpack/v5 gives the zero value; the
//     fallback does that); nil for a bool is false, as in msgpack/v5.
//   - Integers: any fixint, uint8..64 or int8..64 code, converted as Go
//     conversions do (int64(uint64) and uint64(int8) wrap); no floats.
//   - Bytes (json.RawMessage): nil is nil, str or bin is a copy, empty is
//     an empty non-nil slice.
//   - A *string or *Usage: nil is a nil pointer.
//   - Slices: nil is nil, an empty array an empty non-nil slice.
//   - Maps: nil is nil, an empty map an empty non-nil map; a repeated key
//     keeps its last value.
//   - Time: ext type -1 with 4, 8 or 12 bytes (the msgpack timestamp
//     forms), as time.Unix(sec, nsec), in UTC when zero. Not nil.
//
// The decoded payload then goes through the same canonical step as the
// reflection decoder's. The input has not passed checkWire: the reader
// checks every bound itself and rejects anything after the event. The
// fields it knows have shapes of fixed depth (six at most), so only the
// values of unknown keys, which it skips, can nest deeper than
// maxNesting: when it skipped one, it runs checkWire over the input
// before it accepts it.

// reader reads msgpack values from b starting at i. With alias, the
// strings it decodes share b's memory instead of copying it
// ([UnmarshalNoCopy]).
type reader struct {
	b     []byte
	i     int
	alias bool
	// unknown: the value of an unknown key was skipped.
	unknown bool
}

// decodeFast decodes an event, its strings sharing b's memory with alias
// (UnmarshalNoCopy). ok is false when the input is outside what this
// decoder handles (see above), or malformed; e is then meaningless.
func decodeFast(b []byte, alias bool) (e Event, ok bool) {
	r := reader{b: b, alias: alias}
	var payload []byte
	e, payload, ok = r.envelope()
	if !ok || r.i != len(b) || e.SchemaVersion > SchemaVersion || payload == nil {
		return Event{}, false
	}
	pr := reader{b: payload, alias: alias}
	p, ok := pr.payload(e.Type)
	if !ok || pr.i != len(payload) {
		return Event{}, false
	}
	if (r.unknown || pr.unknown) && checkWire(b) != nil {
		return Event{}, false
	}
	e.Payload = p
	return e, true
}

// Envelope field bits, for spotting a field given twice.
const (
	fID = 1 << iota
	fType
	fTenant
	fThread
	fTime
	fProducer
	fCausation
	fCorrelation
	fVersion
	fPayload
)

// envelope reads the envelope map; payload is the raw bytes of the
// payload value (nil when absent), which must be a map.
func (r *reader) envelope() (e Event, payload []byte, ok bool) {
	n, ok := r.mapHeader()
	if !ok {
		return e, nil, false
	}
	var seen uint32
	for range n {
		k, ok := r.strBytes()
		if !ok {
			return e, nil, false
		}
		var bit uint32
		switch string(k) {
		case "id":
			bit = fID
			e.ID, ok = r.str()
		case "type":
			bit = fType
			var t []byte
			t, ok = r.strBytes()
			e.Type = typeOf(t)
		case "tenant":
			bit = fTenant
			e.Tenant, ok = r.str()
		case "thread":
			bit = fThread
			e.Thread, ok = r.str()
		case "time":
			bit = fTime
			e.Time, ok = r.time()
		case "producer":
			bit = fProducer
			e.Producer, ok = r.str()
		case "causation_id":
			bit = fCausation
			e.CausationID, ok = r.str()
		case "correlation_id":
			bit = fCorrelation
			e.CorrelationID, ok = r.str()
		case "v":
			bit = fVersion
			var v int64
			v, ok = r.int64()
			e.SchemaVersion = int(v)
		case "payload":
			bit = fPayload
			start := r.i
			if _, isMap := r.peekMap(); !isMap {
				return e, nil, false
			}
			ok = r.skip(0)
			payload = r.b[start:r.i]
		default:
			r.unknown = true
			ok = r.skip(0)
		}
		if !ok || seen&bit != 0 {
			return e, nil, false
		}
		seen |= bit
	}
	e.Time = e.Time.UTC()
	return e, payload, true
}

// fields reads a struct map, calling field for each key; field returns
// its bit (0 for an unknown key, whose value it must not read) and
// whether the value read well. An unknown key's value is skipped.
func (r *reader) fields(field func(k []byte) (bit uint32, ok bool)) bool {
	n, ok := r.mapHeader()
	if !ok {
		return false
	}
	var seen uint32
	for range n {
		k, ok := r.strBytes()
		if !ok {
			return false
		}
		bit, ok := field(k)
		if !ok {
			return false
		}
		if bit == 0 {
			r.unknown = true
			if !r.skip(0) {
				return false
			}
			continue
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
	}
	return true
}

// stringsInto reads a []string: nil, or an array of str (each copied).
func (r *reader) stringsInto(dst *[]string) bool {
	if r.nilValue() {
		*dst = nil
		return true
	}
	if r.i >= len(r.b) {
		return false
	}
	c := r.b[r.i]
	var n int
	ok := true
	switch {
	case c&0xf0 == 0x90:
		r.i++
		n = int(c & 0x0f)
	case c == 0xdc:
		r.i++
		n, ok = r.length(2)
	case c == 0xdd:
		r.i++
		n, ok = r.length(4)
	default:
		return false
	}
	if !ok || n > len(r.b)-r.i {
		return false
	}
	out := make([]string, n)
	for i := range out {
		if out[i], ok = r.str(); !ok {
			return false
		}
	}
	*dst = out
	return true
}

// messagesInto reads a []Message: nil, or an array of maps, with the
// message-list codec (msgcodec.go), the one decoder of Message; strings are
// copied. Anything the codec refuses goes to the reflection decoder.
func (r *reader) messagesInto(dst *[]Message) bool {
	if r.nilValue() {
		*dst = nil
		return true
	}
	lr := listReader{b: r.b, i: r.i, strict: true, alias: r.alias}
	n, err := lr.arrayLen()
	if err != nil || n < 0 || n > len(r.b)-lr.i {
		return false
	}
	ms := make([]Message, n)
	if lr.messages(ms, nil) != nil {
		return false
	}
	r.i = lr.i
	*dst = ms
	return true
}

// toolCallsInto reads a []ToolCall with the message-list codec (strict).
func (r *reader) toolCallsInto(dst *[]ToolCall) bool {
	lr := listReader{b: r.b, i: r.i, strict: true, alias: r.alias}
	if lr.nilNext() {
		r.i++
		*dst = nil
		return true
	}
	cs, err := lr.toolCalls()
	if err != nil {
		return false
	}
	r.i, *dst = lr.i, cs
	return true
}

// usageInto reads a *Usage with the message-list codec (strict).
func (r *reader) usageInto(dst **Usage) bool {
	lr := listReader{b: r.b, i: r.i, strict: true, alias: r.alias}
	u, err := lr.usage()
	if err != nil {
		return false
	}
	r.i, *dst = lr.i, u
	return true
}

// contentInto reads a Content with the message-list codec (strict).
func (r *reader) contentInto(c *Content) bool {
	lr := listReader{b: r.b, i: r.i, strict: true, alias: r.alias}
	v, err := lr.content()
	if err != nil {
		return false
	}
	r.i, *c = lr.i, v
	return true
}

// stringMapInto reads a map[string]string: nil, or a map of str to str.
func (r *reader) stringMapInto(dst *map[string]string) bool {
	if r.nilValue() {
		*dst = nil
		return true
	}
	n, ok := r.mapHeader()
	if !ok {
		return false
	}
	m := make(map[string]string, n)
	for range n {
		k, ok := r.str()
		if !ok {
			return false
		}
		v, ok := r.str()
		if !ok {
			return false
		}
		m[k] = v
	}
	*dst = m
	return true
}

// rawMapInto reads a map[string]json.RawMessage: nil, or a map of str to
// nil, str or bin.
func (r *reader) rawMapInto(dst *map[string]json.RawMessage) bool {
	if r.nilValue() {
		*dst = nil
		return true
	}
	n, ok := r.mapHeader()
	if !ok {
		return false
	}
	m := make(map[string]json.RawMessage, n)
	for range n {
		k, ok := r.str()
		if !ok {
			return false
		}
		var v []byte
		if !r.bytesInto(&v) {
			return false
		}
		m[k] = v
	}
	*dst = m
	return true
}

func (r *reader) strInto(dst *string) (ok bool) {
	*dst, ok = r.str()
	return ok
}

// strPtrInto reads a *string: nil, or a str.
func (r *reader) strPtrInto(dst **string) bool {
	if r.nilValue() {
		*dst = nil
		return true
	}
	s, ok := r.str()
	*dst = &s
	return ok
}

func (r *reader) uint64Into(dst *uint64) bool {
	v, ok := r.int64()
	*dst = uint64(v)
	return ok
}

// boolInto reads nil (false), false or true.
func (r *reader) boolInto(dst *bool) bool {
	if r.i >= len(r.b) {
		return false
	}
	switch r.b[r.i] {
	case 0xc0, 0xc2:
		*dst = false
	case 0xc3:
		*dst = true
	default:
		return false
	}
	r.i++
	return true
}

// bytesInto reads nil (nil), or a str or bin (a copy; empty non-nil when
// empty).
func (r *reader) bytesInto(dst *[]byte) bool {
	if r.nilValue() {
		*dst = nil
		return true
	}
	if r.i >= len(r.b) {
		return false
	}
	var n int
	var ok bool
	switch c := r.b[r.i]; c {
	case 0xc4, 0xc5, 0xc6: // bin8, bin16, bin32
		r.i++
		n, ok = r.length(1 << (c - 0xc4))
	default:
		var s []byte
		s, ok = r.strBytes()
		if ok {
			*dst = append(make([]byte, 0, len(s)), s...)
		}
		return ok
	}
	if !ok || n > len(r.b)-r.i {
		return false
	}
	*dst = append(make([]byte, 0, n), r.b[r.i:r.i+n]...)
	r.i += n
	return true
}

// nilValue consumes a nil and reports whether there was one.
func (r *reader) nilValue() bool {
	if r.i < len(r.b) && r.b[r.i] == 0xc0 {
		r.i++
		return true
	}
	return false
}

// length reads a big-endian length of size bytes (1, 2 or 4).
func (r *reader) length(size int) (int, bool) {
	if size > len(r.b)-r.i {
		return 0, false
	}
	var n int
	for _, x := range r.b[r.i : r.i+size] {
		n = n<<8 | int(x)
	}
	r.i += size
	return n, true
}

// peekMap reports whether a map starts at the current position.
func (r *reader) peekMap() (byte, bool) {
	if r.i >= len(r.b) {
		return 0, false
	}
	c := r.b[r.i]
	return c, c&0xf0 == 0x80 || c == 0xde || c == 0xdf
}

// mapHeader reads a fixmap, map16 or map32 header.
func (r *reader) mapHeader() (int, bool) {
	c, ok := r.peekMap()
	if !ok {
		return 0, false
	}
	r.i++
	switch c {
	case 0xde:
		return r.length(2)
	case 0xdf:
		return r.length(4)
	}
	return int(c & 0x0f), true
}

// strBytes reads a fixstr, str8, str16 or str32 and returns its bytes
// (not copied).
func (r *reader) strBytes() ([]byte, bool) {
	if r.i >= len(r.b) {
		return nil, false
	}
	c := r.b[r.i]
	var n int
	switch {
	case c&0xe0 == 0xa0:
		r.i++
		n = int(c & 0x1f)
	case c == 0xd9, c == 0xda, c == 0xdb:
		r.i++
		var ok bool
		if n, ok = r.length(1 << (c - 0xd9)); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	if n > len(r.b)-r.i {
		return nil, false
	}
	s := r.b[r.i : r.i+n]
	r.i += n
	return s, true
}

// str reads a str as a string.
func (r *reader) str() (string, bool) {
	b, ok := r.strBytes()
	if r.alias && len(b) > 0 {
		return unsafe.String(&b[0], len(b)), ok
	}
	return string(b), ok
}

// int64 reads any msgpack integer as msgpack/v5's DecodeInt64 does
// (uint64 values wrap); not nil, not floats.
func (r *reader) int64() (int64, bool) {
	if r.i >= len(r.b) {
		return 0, false
	}
	c := r.b[r.i]
	r.i++
	if c <= 0x7f || c >= 0xe0 {
		return int64(int8(c)), true
	}
	var size int
	switch c {
	case 0xcc, 0xd0:
		size = 1
	case 0xcd, 0xd1:
		size = 2
	case 0xce, 0xd2:
		size = 4
	case 0xcf, 0xd3:
		size = 8
	default:
		return 0, false
	}
	if size > len(r.b)-r.i {
		return 0, false
	}
	var u uint64
	for _, x := range r.b[r.i : r.i+size] {
		u = u<<8 | uint64(x)
	}
	r.i += size
	switch c {
	case 0xd0:
		return int64(int8(u)), true
	case 0xd1:
		return int64(int16(u)), true
	case 0xd2:
		return int64(int32(u)), true
	}
	return int64(u), true
}

// time reads a msgpack timestamp (ext type -1 of 4, 8 or 12 bytes) as
// msgpack/v5's time ext decoder does. Not nil: msgpack/v5 panics on it
// (Unmarshal turns that into an error).
func (r *reader) time() (time.Time, bool) {
	if r.i >= len(r.b) {
		return time.Time{}, false
	}
	var n int
	switch r.b[r.i] {
	case 0xd6: // fixext4
		r.i++
		n = 4
	case 0xd7: // fixext8
		r.i++
		n = 8
	case 0xc7: // ext8
		if len(r.b)-r.i < 2 || r.b[r.i+1] != 12 {
			return time.Time{}, false
		}
		r.i += 2
		n = 12
	default:
		return time.Time{}, false
	}
	if len(r.b)-r.i < 1+n || r.b[r.i] != 0xff { // ext type -1
		return time.Time{}, false
	}
	d := r.b[r.i+1 : r.i+1+n]
	r.i += 1 + n
	var t time.Time
	switch n {
	case 4:
		t = time.Unix(int64(binary.BigEndian.Uint32(d)), 0)
	case 8:
		v := binary.BigEndian.Uint64(d)
		t = time.Unix(int64(v&0x00000003ffffffff), int64(v>>34))
	default:
		t = time.Unix(int64(binary.BigEndian.Uint64(d[4:])), int64(binary.BigEndian.Uint32(d)))
	}
	if t.IsZero() {
		t = t.UTC()
	}
	return t, true
}

// skip skips one value of any type; depth counts the containers it is
// in, bounded as checkWire bounds them.
func (r *reader) skip(depth int) bool {
	if r.i >= len(r.b) {
		return false
	}
	c := r.b[r.i]
	r.i++
	var n int // bytes to skip
	switch {
	case c <= 0x7f || c >= 0xe0:
		return true
	case c <= 0x8f:
		return r.skipValues(2*int(c&0x0f), depth)
	case c <= 0x9f:
		return r.skipValues(int(c&0x0f), depth)
	case c <= 0xbf:
		n = int(c & 0x1f)
	case c == 0xdc || c == 0xdd:
		count, ok := r.length(2 << (c - 0xdc))
		return ok && r.skipValues(count, depth)
	case c == 0xde || c == 0xdf:
		count, ok := r.length(2 << (c - 0xde))
		return ok && r.skipValues(2*count, depth)
	default:
		var ok bool
		if n, ok = r.scalarLen(c); !ok {
			return false
		}
	}
	if n > len(r.b)-r.i {
		return false
	}
	r.i += n
	return true
}

// scalarLen reads what follows type byte c (0xc0..0xdb, not an array or
// a map) up to the value's data, and returns how many bytes of data
// follow: none for nil and the booleans, the fixed width of numbers and
// fixed extensions, the length read for strings, binaries and
// extensions (one more for an extension's type byte). It reports false
// for the unused type byte 0xc1 and for a length cut short.
func (r *reader) scalarLen(c byte) (int, bool) {
	switch c {
	case 0xc0, 0xc2, 0xc3:
		return 0, true
	case 0xc4, 0xd9:
		return r.length(1)
	case 0xc5, 0xda:
		return r.length(2)
	case 0xc6, 0xdb:
		return r.length(4)
	case 0xc7, 0xc8, 0xc9:
		n, ok := r.length(1 << (c - 0xc7))
		return n + 1, ok
	case 0xcc, 0xd0:
		return 1, true
	case 0xcd, 0xd1:
		return 2, true
	case 0xca, 0xce, 0xd2:
		return 4, true
	case 0xcb, 0xcf, 0xd3:
		return 8, true
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return 1 + 1<<(c-0xd4), true
	}
	return 0, false
}

// skipValues skips the n values of a container at depth.
func (r *reader) skipValues(n, depth int) bool {
	if n == 0 {
		return true
	}
	if depth >= maxNesting {
		return false
	}
	for range n {
		if !r.skip(depth + 1) {
			return false
		}
	}
	return true
}
