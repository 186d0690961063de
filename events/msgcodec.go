package events

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// This file is the codec of message lists, the bulk of every snapshot: a
// hand-written msgpack encoder and decoder for []Message.
//
// The bytes are plain msgpack, one map per message with the field names and
// omitempty rules of Message's msgpack tags, so any msgpack library
// decodes a chunk into a list of messages. The hand-written path exists for
// speed (BenchmarkMessageList: the reflection-based decoder of msgpack/v5
// is the baseline, see the ratios there). A test checks it against the
// reflection-based codec in both directions, and a fuzzer.

// errCodec is wrapped by every error of the fast decoder.
var errCodec = errors.New("events: malformed message list")

// ErrMessageList is wrapped by every error of [ParseMessages],
// [ParseMessagesInto], [DecodeMessages] and [ArrayHeader]: the bytes are
// not a msgpack array of messages.
var ErrMessageList = errCodec

// AppendMessages appends ms as a msgpack array of message maps (the
// format of a snapshot chunk: see the top of this file). It never fails.
func AppendMessages(b []byte, ms []Message) []byte {
	b = AppendArrayHeader(b, len(ms))
	for i := range ms {
		b = AppendMessage(b, &ms[i])
	}
	return b
}

// AppendMessage appends m as one msgpack map with the field names and
// omitempty rules of Message's msgpack tags, without an array header: a
// list is [AppendArrayHeader] followed by its messages. It never fails.
func AppendMessage(b []byte, m *Message) []byte {
	n := 2
	for _, present := range [...]bool{m.Name != "", m.Reasoning != "", len(m.ToolCalls) > 0,
		m.ToolCallID != "", m.IsError, m.Agent != "", m.Model != "", m.Usage != nil,
		len(m.Metadata) > 0, m.Seq != 0, m.EventID != "", !m.Time.IsZero(), m.Synthetic} {
		if present {
			n++
		}
	}
	b = appendMapLen(b, n)
	b = appendString(b, "role")
	b = appendString(b, string(m.Role))
	b = appendString(b, "content")
	b = appendContent(b, m.Content)
	if m.Name != "" {
		b = appendString(b, "name")
		b = appendString(b, m.Name)
	}
	if m.Reasoning != "" {
		b = appendString(b, "reasoning")
		b = appendString(b, m.Reasoning)
	}
	if len(m.ToolCalls) > 0 {
		b = appendString(b, "tool_calls")
		b = AppendArrayHeader(b, len(m.ToolCalls))
		for _, c := range m.ToolCalls {
			b = appendMapLen(b, 3)
			b = appendString(b, "id")
			b = appendString(b, c.ID)
			b = appendString(b, "name")
			b = appendString(b, c.Name)
			b = appendString(b, "arguments")
			b = appendString(b, c.Arguments)
		}
	}
	if m.ToolCallID != "" {
		b = appendString(b, "tool_call_id")
		b = appendString(b, m.ToolCallID)
	}
	if m.IsError {
		b = appendString(b, "is_error")
		b = appendBool(b, true)
	}
	if m.Agent != "" {
		b = appendString(b, "agent")
		b = appendString(b, m.Agent)
	}
	if m.Model != "" {
		b = appendString(b, "model")
		b = appendString(b, m.Model)
	}
	if m.Usage != nil {
		b = appendString(b, "usage")
		b = appendUsage(b, m.Usage)
	}
	if len(m.Metadata) > 0 {
		b = appendString(b, "metadata")
		b = appendBin(b, m.Metadata)
	}
	if m.Seq != 0 {
		b = appendString(b, "seq")
		b = appendUint(b, m.Seq)
	}
	if m.EventID != "" {
		b = appendString(b, "event_id")
		b = appendString(b, m.EventID)
	}
	if !m.Time.IsZero() {
		b = appendString(b, "time")
		b = appendTime(b, m.Time)
	}
	if m.Synthetic {
		b = appendString(b, "synthetic")
		b = appendBool(b, true)
	}
	return b
}

// appendUsage appends u as a msgpack map holding only its non-zero token
// counts (input_tokens, output_tokens, total_tokens), the omitempty rule of
// Usage's msgpack tags. It never fails.
func appendUsage(b []byte, u *Usage) []byte {
	k := 0
	for _, v := range [...]int64{u.InputTokens, u.OutputTokens, u.TotalTokens} {
		if v != 0 {
			k++
		}
	}
	b = appendMapLen(b, k)
	if u.InputTokens != 0 {
		b = appendString(b, "input_tokens")
		b = appendInt(b, u.InputTokens)
	}
	if u.OutputTokens != 0 {
		b = appendString(b, "output_tokens")
		b = appendInt(b, u.OutputTokens)
	}
	if u.TotalTokens != 0 {
		b = appendString(b, "total_tokens")
		b = appendInt(b, u.TotalTokens)
	}
	return b
}

func appendContent(b []byte, c Content) []byte {
	switch c.Kind {
	case ContentText:
		return appendString(b, c.Text)
	case ContentParts:
		b = AppendArrayHeader(b, len(c.Parts))
		for _, p := range c.Parts {
			n := 1
			for _, s := range [...]string{p.Text, p.URL, p.Data, p.MediaType, p.Detail, p.FileID, p.Filename} {
				if s != "" {
					n++
				}
			}
			b = appendMapLen(b, n)
			b = appendString(b, "type")
			b = appendString(b, string(p.Type))
			for _, kv := range [...][2]string{{"text", p.Text}, {"url", p.URL}, {"data", p.Data},
				{"media_type", p.MediaType}, {"detail", p.Detail}, {"file_id", p.FileID}, {"filename", p.Filename}} {
				if kv[1] != "" {
					b = appendString(b, kv[0])
					b = appendString(b, kv[1])
				}
			}
		}
		return b
	}
	return append(b, 0xc0)
}

// ArrayHeaderSize is the size in bytes (1, 3 or 5) of the msgpack array
// header [AppendArrayHeader] writes for n elements.
func ArrayHeaderSize(n int) int {
	switch {
	case n < 16:
		return 1
	case n <= math.MaxUint16:
		return 3
	}
	return 5
}

// AppendArrayHeader appends a msgpack array header for n elements (n >= 0).
func AppendArrayHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xdc, byte(n>>8), byte(n))
	}
	return append(b, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xde, byte(n>>8), byte(n))
	}
	return append(b, 0xdf, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendString(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xda, byte(n>>8), byte(n))
	default:
		b = append(b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

func appendBin(b []byte, v []byte) []byte {
	n := len(v)
	switch {
	case n <= math.MaxUint8:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xc5, byte(n>>8), byte(n))
	default:
		b = append(b, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, v...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return append(b, 0xcd, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(b, 0xce, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendUint(b, uint64(v))
	}
	switch {
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return append(b, 0xd1, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return append(b, 0xd2, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

// appendTime writes the msgpack timestamp extension (type -1) in the same
// 4/8/12-byte forms as the msgpack library.
func appendTime(b []byte, t time.Time) []byte {
	secs := uint64(t.Unix())
	if secs>>34 == 0 {
		data := uint64(t.Nanosecond())<<34 | secs
		if data&0xffffffff00000000 == 0 {
			return binary.BigEndian.AppendUint32(append(b, 0xd6, 0xff), uint32(data))
		}
		return binary.BigEndian.AppendUint64(append(b, 0xd7, 0xff), data)
	}
	b = binary.BigEndian.AppendUint32(append(b, 0xc7, 12, 0xff), uint32(t.Nanosecond()))
	return binary.BigEndian.AppendUint64(b, secs)
}

// listReader is a msgpack cursor over a byte slice. Every method checks bounds;
// a malformed input yields an error wrapping errCodec, never a panic.
type listReader struct {
	b []byte
	i int
	// alias makes decoded strings share b's memory instead of copying it.
	// Only for buffers nobody modifies afterwards (values read from NATS).
	alias bool
	// strict refuses the forms the reflection decoder refuses (a nil
	// time), for the event decoder, which must decode exactly as
	// reflection does (decode.go).
	strict bool
}

// nilNext reports whether a msgpack nil is next.
func (r *listReader) nilNext() bool { return r.i < len(r.b) && r.b[r.i] == 0xc0 }

func (r *listReader) fail(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", errCodec, r.i, fmt.Sprintf(format, args...))
}

func (r *listReader) need(n int) error {
	if n < 0 || len(r.b)-r.i < n {
		return r.fail("unexpected end of data (need %d bytes)", n)
	}
	return nil
}

func (r *listReader) byte1() (byte, error) {
	if err := r.need(1); err != nil {
		return 0, err
	}
	c := r.b[r.i]
	r.i++
	return c, nil
}

func (r *listReader) uintN(n int) (uint64, error) {
	if err := r.need(n); err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range r.b[r.i : r.i+n] {
		v = v<<8 | uint64(c)
	}
	r.i += n
	return v, nil
}

// lenOf reads the length of a container or string whose code is c and whose
// fix form has base f with mask m, 16-bit form c16 and 32-bit form c32.
func (r *listReader) lenOf(c, f, m, c8, c16, c32 byte) (int, error) {
	switch {
	case c&^m == f:
		return int(c & m), nil
	case c8 != 0 && c == c8:
		v, err := r.uintN(1)
		return int(v), err
	case c == c16:
		v, err := r.uintN(2)
		return int(v), err
	case c == c32:
		v, err := r.uintN(4)
		if v > math.MaxInt32 {
			return 0, r.fail("length %d too large", v)
		}
		return int(v), err
	}
	return -2, nil
}

// arrayLen reads an array header; nil reads as -1.
func (r *listReader) arrayLen() (int, error) {
	c, err := r.byte1()
	if err != nil {
		return 0, err
	}
	if c == 0xc0 {
		return -1, nil
	}
	n, err := r.lenOf(c, 0x90, 0x0f, 0, 0xdc, 0xdd)
	if err == nil && n == -2 {
		return 0, r.fail("expected an array, got code 0x%02x", c)
	}
	return n, err
}

// mapLen reads a map header; nil reads as -1.
func (r *listReader) mapLen() (int, error) {
	c, err := r.byte1()
	if err != nil {
		return 0, err
	}
	if c == 0xc0 {
		return -1, nil
	}
	n, err := r.lenOf(c, 0x80, 0x0f, 0, 0xde, 0xdf)
	if err == nil && n == -2 {
		return 0, r.fail("expected a map, got code 0x%02x", c)
	}
	return n, err
}

// rawString reads a str (or bin) without copying; nil reads as empty.
func (r *listReader) rawString() ([]byte, error) {
	// Fast path for the common forms (fixstr, str8, str16) when they fit
	// in the data; everything else, including every error, goes the
	// checked way below.
	if b, i := r.b, r.i; i < len(b) {
		c := b[i]
		n, h := 0, 0
		switch {
		case c&0xe0 == 0xa0:
			n, h = int(c&0x1f), 1
		case c == 0xd9 && i+1 < len(b):
			n, h = int(b[i+1]), 2
		case c == 0xda && i+2 < len(b):
			n, h = int(b[i+1])<<8|int(b[i+2]), 3
		}
		if h > 0 && n <= len(b)-i-h {
			r.i = i + h + n
			return b[i+h : i+h+n], nil
		}
	}
	c, err := r.byte1()
	if err != nil {
		return nil, err
	}
	if c == 0xc0 {
		return nil, nil
	}
	var n int
	switch c {
	case 0xc4:
		var v uint64
		v, err = r.uintN(1)
		n = int(v)
	case 0xc5:
		var v uint64
		v, err = r.uintN(2)
		n = int(v)
	case 0xc6:
		var v uint64
		v, err = r.uintN(4)
		n = int(v)
	default:
		n, err = r.lenOf(c, 0xa0, 0x1f, 0xd9, 0xda, 0xdb)
		if err == nil && n == -2 {
			return nil, r.fail("expected a string, got code 0x%02x", c)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := r.need(n); err != nil {
		return nil, err
	}
	s := r.b[r.i : r.i+n]
	r.i += n
	return s, nil
}

func (r *listReader) str() (string, error) {
	s, err := r.rawString()
	if r.alias && len(s) > 0 {
		return unsafe.String(&s[0], len(s)), err
	}
	return string(s), err
}

// role reads a role, without allocating for the four known ones.
func (r *listReader) role() (Role, error) {
	s, err := r.rawString()
	switch string(s) {
	case "user":
		return RoleUser, err
	case "assistant":
		return RoleAssistant, err
	case "tool":
		return RoleTool, err
	case "system":
		return RoleSystem, err
	}
	return Role(s), err
}

func (r *listReader) bool1() (bool, error) {
	c, err := r.byte1()
	if err != nil {
		return false, err
	}
	switch c {
	case 0xc2, 0xc0:
		return false, nil
	case 0xc3:
		return true, nil
	}
	return false, r.fail("expected a bool, got code 0x%02x", c)
}

func (r *listReader) int64() (int64, error) {
	// Fast path: positive fixint and the unsigned forms up to 32 bits.
	if b, i := r.b, r.i; i < len(b) {
		switch c := b[i]; {
		case c <= 0x7f:
			r.i++
			return int64(c), nil
		case c == 0xcd && len(b)-i >= 3:
			r.i += 3
			return int64(binary.BigEndian.Uint16(b[i+1:])), nil
		case c == 0xce && len(b)-i >= 5:
			r.i += 5
			return int64(binary.BigEndian.Uint32(b[i+1:])), nil
		}
	}
	c, err := r.byte1()
	if err != nil {
		return 0, err
	}
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	}
	var v uint64
	switch c {
	case 0xc0:
		return 0, nil
	case 0xcc, 0xd0:
		v, err = r.uintN(1)
		if c == 0xd0 {
			return int64(int8(v)), err
		}
	case 0xcd, 0xd1:
		v, err = r.uintN(2)
		if c == 0xd1 {
			return int64(int16(v)), err
		}
	case 0xce, 0xd2:
		v, err = r.uintN(4)
		if c == 0xd2 {
			return int64(int32(v)), err
		}
	case 0xcf, 0xd3:
		v, err = r.uintN(8)
	default:
		return 0, r.fail("expected an integer, got code 0x%02x", c)
	}
	return int64(v), err
}

func (r *listReader) time1() (time.Time, error) {
	// Fast path: the 64-bit form (timestamp 64), what Marshal writes for
	// nanosecond times before 2514.
	if b, i := r.b, r.i; len(b)-i >= 10 && b[i] == 0xd7 && b[i+1] == 0xff {
		d := binary.BigEndian.Uint64(b[i+2:])
		r.i = i + 10
		return time.Unix(int64(d&(1<<34-1)), int64(d>>34)).UTC(), nil
	}
	c, err := r.byte1()
	if err != nil {
		return time.Time{}, err
	}
	var n int
	switch c {
	case 0xc0:
		if r.strict {
			// msgpack/v5 refuses nil for a time.Time (the reflection
			// decoder fails the event): so must the event decoder.
			return time.Time{}, r.fail("nil time")
		}
		return time.Time{}, nil
	case 0xd6:
		n = 4
	case 0xd7:
		n = 8
	case 0xc7:
		l, err := r.byte1()
		if err != nil {
			return time.Time{}, err
		}
		n = int(l)
	default:
		return time.Time{}, r.fail("expected a timestamp, got code 0x%02x", c)
	}
	typ, err := r.byte1()
	if err != nil {
		return time.Time{}, err
	}
	if typ != 0xff {
		return time.Time{}, r.fail("expected timestamp extension -1, got %d", int8(typ))
	}
	switch n {
	case 4:
		s, err := r.uintN(4)
		return time.Unix(int64(s), 0).UTC(), err
	case 8:
		d, err := r.uintN(8)
		return time.Unix(int64(d&(1<<34-1)), int64(d>>34)).UTC(), err
	case 12:
		ns, err := r.uintN(4)
		if err != nil {
			return time.Time{}, err
		}
		s, err := r.uintN(8)
		return time.Unix(int64(s), int64(ns)).UTC(), err
	}
	return time.Time{}, r.fail("timestamp of %d bytes", n)
}

// skip skips one value of any type, nested at most 64 deep. It returns a
// codec error for a value that is cut short, nests too deep, or starts with
// an invalid code.
func (r *listReader) skip(depth int) error {
	if depth > 64 {
		return r.fail("nesting too deep")
	}
	c, err := r.byte1()
	if err != nil {
		return err
	}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return nil
	case c&0xe0 == 0xa0:
		return r.advance(int(c & 0x1f))
	case c&0xf0 == 0x90:
		return r.skipN(int(c&0x0f), depth)
	case c&0xf0 == 0x80:
		return r.skipN(2*int(c&0x0f), depth)
	}
	if n, ok := fixedBodySize(c); ok {
		return r.advance(n)
	}
	switch c {
	case 0xd9, 0xc4, 0xc7, 0xda, 0xc5, 0xc8, 0xdb, 0xc6, 0xc9:
		return r.skipSized(c)
	case 0xdc, 0xde, 0xdd, 0xdf:
		return r.skipContainer(c, depth)
	}
	return r.fail("invalid code 0x%02x", c)
}

// fixedBodySize reports the number of bytes that follow code c for the
// msgpack formats whose body has a fixed size (sized numbers and fixext),
// and false for every other code.
func fixedBodySize(c byte) (int, bool) {
	switch c {
	case 0xcc, 0xd0:
		return 1, true
	case 0xcd, 0xd1, 0xd4:
		return 2, true
	case 0xd5:
		return 3, true
	case 0xce, 0xd2, 0xca:
		return 4, true
	case 0xd6:
		return 5, true
	case 0xcf, 0xd3, 0xcb:
		return 8, true
	case 0xd7:
		return 9, true
	case 0xd8:
		return 17, true
	}
	return 0, false
}

// skipSized skips the body of a str 8/16/32, bin 8/16/32 or ext 8/16/32
// value whose code c has been read: a length of 1, 2 or 4 bytes, then that
// many bytes (plus the type byte for ext). It returns a codec error if the
// data is cut short.
func (r *listReader) skipSized(c byte) error {
	width, extra := 4, 0
	switch c {
	case 0xd9, 0xc4, 0xc7:
		width = 1
	case 0xda, 0xc5, 0xc8:
		width = 2
	}
	if c == 0xc7 || c == 0xc8 || c == 0xc9 {
		extra = 1
	}
	n, err := r.uintN(width)
	if err != nil {
		return err
	}
	return r.advance(int(n) + extra)
}

// skipContainer skips the elements of an array 16/32 or map 16/32 value
// whose code c has been read, each nested at depth+1. It returns a codec
// error if the data is cut short, a 32-bit count exceeds the data, or an
// element fails to skip.
func (r *listReader) skipContainer(c byte, depth int) error {
	width := 2
	if c == 0xdd || c == 0xdf {
		width = 4
	}
	n, err := r.uintN(width)
	if err != nil {
		return err
	}
	if c == 0xde || c == 0xdf {
		n *= 2
	}
	if width == 4 && n > uint64(len(r.b)) {
		return r.fail("container of %d elements exceeds the data", n)
	}
	return r.skipN(int(n), depth)
}

func (r *listReader) advance(n int) error {
	if err := r.need(n); err != nil {
		return err
	}
	r.i += n
	return nil
}

func (r *listReader) skipN(n, depth int) error {
	for ; n > 0; n-- {
		if err := r.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// parseMessages decodes a msgpack array of messages. If sizes is not nil,
// the encoded size of each message is appended to *sizes.
func parseMessages(b []byte, sizes *[]int) ([]Message, error) {
	return ParseMessages(b, sizes, false)
}

// ParseMessages decodes a msgpack array of messages with the hand-written
// decoder only (no fallback: see [DecodeMessages]). When sizes is not nil,
// the encoded size of each message is appended to *sizes. With alias, the
// decoded strings share b's memory instead of copying it: only for bytes
// nobody modifies afterwards (values read from NATS). Errors wrap
// [ErrMessageList] and give the byte offset.
func ParseMessages(b []byte, sizes *[]int, alias bool) ([]Message, error) {
	r := &listReader{b: b, alias: alias}
	n, err := r.arrayLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, r.end()
	}
	if n > len(b) {
		return nil, r.fail("array of %d messages exceeds the data", n)
	}
	// A message takes at least 8 bytes in practice; do not let a bogus
	// count allocate more than the data can fill.
	ms := make([]Message, min(n, len(b)/8+1))
	if n > len(ms) {
		ms = ms[:0]
		for i := 0; i < n; i++ {
			start := r.i
			var m Message
			if err := r.message(&m); err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
			if sizes != nil {
				*sizes = append(*sizes, r.i-start)
			}
			ms = append(ms, m)
		}
	} else if err := r.messages(ms, sizes); err != nil {
		return nil, err
	}
	return ms, r.end()
}

// ParseMessagesInto decodes a msgpack array of exactly len(dst) messages
// into dst, falling back to the reflection-based decoder. Decoded strings
// share b's memory: b must not be modified afterwards. Errors wrap
// [ErrMessageList] (also for a list of another length).
func ParseMessagesInto(b []byte, dst []Message) error {
	r := &listReader{b: b, alias: true}
	n, err := r.arrayLen()
	if err == nil && n != len(dst) {
		return r.fail("the list holds %d messages, %d expected", max(n, 0), len(dst))
	}
	if err == nil {
		if err = r.messages(dst, nil); err == nil {
			err = r.end()
		}
	}
	if err != nil {
		ms, err2 := decodeMessagesSlow(b)
		if err2 != nil || len(ms) != len(dst) {
			return err
		}
		copy(dst, ms)
	}
	return nil
}

func (r *listReader) messages(ms []Message, sizes *[]int) error {
	for i := range ms {
		start := r.i
		if err := r.message(&ms[i]); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if sizes != nil {
			*sizes = append(*sizes, r.i-start)
		}
	}
	return nil
}

func (r *listReader) end() error {
	if r.i != len(r.b) {
		return r.fail("%d trailing bytes", len(r.b)-r.i)
	}
	return nil
}

func (r *listReader) message(m *Message) error {
	n, err := r.mapLen()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		k, err := r.rawString()
		if err != nil {
			return err
		}
		if err := r.messageField(m, string(k)); err != nil {
			return fmt.Errorf("field %q: %w", k, err)
		}
	}
	return nil
}

// messageField reads the value of m's field k; an unknown field is
// skipped.
func (r *listReader) messageField(m *Message, k string) error {
	var err error
	switch k {
	case "role":
		m.Role, err = r.role()
	case "content":
		m.Content, err = r.content()
	case "name":
		m.Name, err = r.str()
	case "reasoning":
		m.Reasoning, err = r.str()
	case "tool_calls":
		m.ToolCalls, err = r.toolCalls()
	case "tool_call_id":
		m.ToolCallID, err = r.str()
	case "is_error":
		m.IsError, err = r.bool1()
	case "agent":
		m.Agent, err = r.str()
	case "model":
		m.Model, err = r.str()
	case "usage":
		m.Usage, err = r.usage()
	case "metadata":
		m.Metadata, err = r.metadata()
	case "seq":
		var v int64
		v, err = r.int64()
		m.Seq = uint64(v)
	case "event_id":
		m.EventID, err = r.str()
	case "time":
		m.Time, err = r.time1()
	case "synthetic":
		m.Synthetic, err = r.bool1()
	default:
		err = r.skip(0)
	}
	return err
}

// metadata reads a message's metadata, JSON kept as a string: a copy of
// it, or nil when it is empty.
func (r *listReader) metadata() (json.RawMessage, error) {
	raw, err := r.rawString()
	if len(raw) == 0 {
		return nil, err
	}
	return json.RawMessage(append([]byte(nil), raw...)), err
}

func (r *listReader) content() (Content, error) {
	if err := r.need(1); err != nil {
		return Content{}, err
	}
	c := r.b[r.i]
	switch {
	case c == 0xc0:
		r.i++
		return Content{}, nil
	case c&0xe0 == 0xa0 || c == 0xd9 || c == 0xda || c == 0xdb:
		s, err := r.str()
		return Text(s), err
	}
	n, err := r.arrayLen()
	if err != nil {
		return Content{}, err
	}
	if n < 0 || n > len(r.b) {
		return Content{}, r.fail("content parts length %d", n)
	}
	if r.strict && n > maxParts {
		// Content's msgpack decoder refuses it (content.go).
		return Content{}, r.fail("%d content parts, at most %d", n, maxParts)
	}
	ps := make([]Part, n)
	for i := range ps {
		if err := r.part(&ps[i]); err != nil {
			return Content{}, err
		}
	}
	return Parts(ps...), nil
}

// part reads one content part into p; unknown fields are skipped.
func (r *listReader) part(p *Part) error {
	k, err := r.mapLen()
	if err != nil {
		return err
	}
	for ; k > 0; k-- {
		key, err := r.rawString()
		if err != nil {
			return err
		}
		var dst *string
		switch string(key) {
		case "type":
			var s string
			s, err = r.str()
			p.Type = PartType(s)
		case "text":
			dst = &p.Text
		case "url":
			dst = &p.URL
		case "data":
			dst = &p.Data
		case "media_type":
			dst = &p.MediaType
		case "detail":
			dst = &p.Detail
		case "file_id":
			dst = &p.FileID
		case "filename":
			dst = &p.Filename
		default:
			err = r.skip(0)
		}
		if dst != nil {
			*dst, err = r.str()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *listReader) toolCalls() ([]ToolCall, error) {
	n, err := r.arrayLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	if n > len(r.b) {
		return nil, r.fail("tool call list length %d", n)
	}
	cs := make([]ToolCall, n)
	for i := range cs {
		k, err := r.mapLen()
		if err != nil {
			return nil, err
		}
		for ; k > 0; k-- {
			key, err := r.rawString()
			if err != nil {
				return nil, err
			}
			switch string(key) {
			case "id":
				cs[i].ID, err = r.str()
			case "name":
				cs[i].Name, err = r.str()
			case "arguments":
				cs[i].Arguments, err = r.str()
			default:
				err = r.skip(0)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return cs, nil
}

func (r *listReader) usage() (*Usage, error) {
	n, err := r.mapLen()
	if err != nil || n < 0 {
		return nil, err
	}
	u := &Usage{}
	for ; n > 0; n-- {
		key, err := r.rawString()
		if err != nil {
			return nil, err
		}
		switch string(key) {
		case "input_tokens":
			u.InputTokens, err = r.int64()
		case "output_tokens":
			u.OutputTokens, err = r.int64()
		case "total_tokens":
			u.TotalTokens, err = r.int64()
		default:
			err = r.skip(0)
		}
		if err != nil {
			return nil, err
		}
	}
	return u, nil
}

// decodeMessagesSlow decodes a message list with the reflection-based
// msgpack library: the fallback for bytes the fast path rejects.
func decodeMessagesSlow(b []byte) ([]Message, error) {
	var ms []Message
	if err := msgpack.Unmarshal(b, &ms); err != nil {
		return nil, fmt.Errorf("%w: %v", errCodec, err)
	}
	for i := range ms {
		if !ms[i].Time.IsZero() {
			ms[i].Time = ms[i].Time.UTC()
		}
	}
	return ms, nil
}

// DecodeMessages decodes a msgpack array of messages: the hand-written
// decoder first, the reflection-based one (msgpack/v5) for what it does
// not handle. Strings are copied. Errors wrap [ErrMessageList].
func DecodeMessages(b []byte) ([]Message, error) {
	ms, err := parseMessages(b, nil)
	if err != nil {
		if ms2, err2 := decodeMessagesSlow(b); err2 == nil {
			return ms2, nil
		}
	}
	return ms, err
}

// ArrayHeader reads the msgpack array header at the start of b: the number
// of elements and the header's size in bytes; a msgpack nil counts as an
// empty array. Errors wrap [ErrMessageList] (not an array, or truncated).
func ArrayHeader(b []byte) (n, size int, err error) {
	r := &listReader{b: b}
	n, err = r.arrayLen()
	return max(n, 0), r.i, err
}
