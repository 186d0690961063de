package events_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/events"
)

// requireSameDecode checks the hand-written decoder against the
// reflection decoder on b: Unmarshal gives the same event and the same
// error text as the reflection decoder, and when the hand-written decoder
// alone accepts b, the reflection decoder accepts it too and gives the
// same event. It returns whether the hand-written decoder accepted b.
func requireSameDecode(t testing.TB, b []byte) bool {
	t.Helper()
	want, werr := events.UnmarshalReflect(b)
	got, gerr := events.Unmarshal(b)
	require.True(t, reflect.DeepEqual(want, got), "Unmarshal of %x:\nreflection: %#v\nUnmarshal:  %#v", b, want, got)
	if werr == nil {
		require.NoError(t, gerr, "%x", b)
	} else {
		require.Error(t, gerr, "%x", b)
		require.Equal(t, werr.Error(), gerr.Error(), "%x", b)
	}
	// UnmarshalNoCopy gives the same, on a copy of b that stays as it is.
	shared := bytes.Clone(b)
	nocopy, nerr := events.UnmarshalNoCopy(shared)
	require.True(t, reflect.DeepEqual(want, nocopy), "UnmarshalNoCopy of %x:\nreflection:      %#v\nUnmarshalNoCopy: %#v", b, want, nocopy)
	if werr == nil {
		require.NoError(t, nerr, "%x", b)
	} else {
		require.Equal(t, werr.Error(), nerr.Error(), "%x", b)
	}
	fast, ok := events.DecodeFast(b)
	if !ok {
		return false
	}
	require.NoError(t, werr, "the hand-written decoder accepted %x, the reflection decoder did not", b)
	require.True(t, reflect.DeepEqual(want, fast), "decode of %x:\nreflection:   %#v\nhand-written: %#v", b, want, fast)
	return true
}

// UnmarshalNoCopy's strings share the input's memory (what saves the
// copies), Unmarshal's do not: overwriting the input afterwards shows
// through the first and not the second.
func TestUnmarshalNoCopySharesTheInput(t *testing.T) {
	for name, b := range benchEvents() {
		copied, err := events.Unmarshal(b)
		require.NoError(t, err, name)
		b = bytes.Clone(b)
		shared, err := events.UnmarshalNoCopy(b)
		require.NoError(t, err, name)
		require.Equal(t, copied, shared, name)
		for i := range b {
			b[i] = 'Z'
		}
		require.Equal(t, strings.Repeat("Z", len(shared.ID)), shared.ID, "%s: the event id shares the input", name)
		require.NotEqual(t, copied, shared, name)
		require.NotContains(t, copied.ID, "Z", name)
		if u, ok := shared.Payload.(events.UserMessage); ok {
			require.Equal(t, strings.Repeat("Z", 512), u.Content.Text, "%s: the message's text shares the input", name)
		}
	}
}

// eventTimes are envelope and message times in each msgpack timestamp
// form (32-, 64- and 96-bit) and the zero time.
var eventTimes = []time.Time{
	time.Unix(1700000000, 0).UTC(),
	testTime,
	time.Date(1969, 7, 20, 20, 17, 40, 5, time.UTC),
	time.Date(2500, 1, 1, 0, 0, 0, 1, time.UTC),
	{},
}

// payloadVariants returns p with subsets of its set fields cleared: every
// subset when p has at most 10 set fields, else each field alone cleared
// and each field alone kept.
func payloadVariants(p events.Payload) []events.Payload {
	v := reflect.ValueOf(p)
	var set []int
	for i := range v.NumField() {
		if !v.Field(i).IsZero() {
			set = append(set, i)
		}
	}
	with := func(keep func(k int) bool) events.Payload {
		c := reflect.New(v.Type()).Elem()
		for k, i := range set {
			if keep(k) {
				c.Field(i).Set(v.Field(i))
			}
		}
		return c.Interface().(events.Payload)
	}
	var out []events.Payload
	if len(set) <= 10 {
		for mask := range 1 << len(set) {
			out = append(out, with(func(k int) bool { return mask&(1<<k) != 0 }))
		}
		return out
	}
	for j := range set {
		out = append(out, with(func(k int) bool { return k != j }), with(func(k int) bool { return k == j }))
	}
	return out
}

// Every event Marshal writes, of every type, with every combination of
// optional payload fields, optional envelope fields and time form, is
// decoded by the hand-written decoder (no fallback), to exactly what the
// reflection decoder gives.
func TestDecodeFastMatchesReflectionOnEverythingMarshalWrites(t *testing.T) {
	n := 0
	for _, set := range []map[events.Type]events.Event{sampleEvents(), minimalEvents()} {
		for _, typ := range events.AllTypes {
			base := set[typ]
			for _, p := range payloadVariants(base.Payload) {
				for _, ids := range [][2]string{{"", ""}, {"c", ""}, {"", "r"}, {"c", "r"}} {
					for _, tm := range eventTimes {
						e := base
						e.Payload, e.CausationID, e.CorrelationID, e.Time = p, ids[0], ids[1], tm
						b, err := events.Marshal(e)
						require.NoError(t, err)
						require.True(t, requireSameDecode(t, b), "%s %#v: the hand-written decoder fell back", typ, p)
						n++
					}
				}
			}
		}
	}
	t.Logf("%d encodings", n)
}

// The fuzz seeds (golden vectors, transcripts, fixtures, garbage) decode
// the same both ways, and every seed that is an event takes the
// hand-written path.
func TestDecodeFastMatchesReflectionOnSeeds(t *testing.T) {
	for _, b := range unmarshalSeeds(t) {
		_, err := events.UnmarshalReflect(b)
		fast := requireSameDecode(t, b)
		require.Equal(t, err == nil, fast, "%x", b)
	}
}

// mp builds msgpack by hand, for inputs Marshal never writes.
type mp struct{ bytes.Buffer }

func (m *mp) raw(b ...byte) *mp { m.Write(b); return m }
func (m *mp) str(s string) *mp {
	e := msgpack.NewEncoder(&m.Buffer)
	_ = e.EncodeString(s)
	return m
}
func (m *mp) str8(s string) *mp  { return m.raw(0xd9, byte(len(s))).raw([]byte(s)...) }
func (m *mp) str16(s string) *mp { return m.raw(0xda, byte(len(s)>>8), byte(len(s))).raw([]byte(s)...) }
func (m *mp) bin(s string) *mp   { return m.raw(0xc4, byte(len(s))).raw([]byte(s)...) }
func (m *mp) fixmap(n int) *mp   { return m.raw(0x80 | byte(n)) }
func (m *mp) map16(n int) *mp    { return m.raw(0xde, byte(n>>8), byte(n)) }
func (m *mp) val(v any) *mp {
	e := msgpack.NewEncoder(&m.Buffer)
	e.SetSortMapKeys(true)
	if err := e.Encode(v); err != nil {
		panic(err)
	}
	return m
}

// field is one key and its encoded value. A key starting with a zero
// byte is the encoded key itself (after that byte), not a str.
type field struct {
	k string
	v []byte
}

// rawKey is a field whose key is given encoded.
func rawKey(key, v []byte) field { return field{"\x00" + string(key), v} }

func enc(f func(m *mp)) []byte {
	var m mp
	f(&m)
	return m.Bytes()
}

func encVal(v any) []byte { return enc(func(m *mp) { m.val(v) }) }

// mapOf encodes fields as a msgpack map, in the given order.
func mapOf(fs ...field) []byte {
	var m mp
	m.map16(len(fs)) // a map16 header even when small: another valid form
	for _, f := range fs {
		if k, ok := strings.CutPrefix(f.k, "\x00"); ok {
			m.raw([]byte(k)...).raw(f.v...)
			continue
		}
		m.str(f.k).raw(f.v...)
	}
	return m.Bytes()
}

// envelopeFields are the envelope of a user message, field by field.
func envelopeFields(payload []byte) []field {
	return []field{
		{"id", encVal("01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b")},
		{"type", encVal("message.user")},
		{"tenant", encVal("acme")},
		{"thread", encVal("t-1")},
		{"time", encVal(testTime)},
		{"producer", encVal("p")},
		{"v", encVal(1)},
		{"payload", payload},
	}
}

func replaceField(fs []field, k string, v []byte) []field {
	out := append([]field(nil), fs...)
	for i := range out {
		if out[i].k == k {
			out[i].v = v
			return out
		}
	}
	return append(out, field{k, v})
}

func dropField(fs []field, k string) []field {
	var out []field
	for _, f := range fs {
		if f.k != k {
			out = append(out, f)
		}
	}
	return out
}

// wireVariants are encodings Marshal does not write but a foreign or
// future writer might: other valid forms of the same values, unknown
// fields, fields given twice, values of the wrong type, newer schema
// versions, unknown types. Each case has a name for failure messages.
func wireVariants() map[string][]byte {
	user := mapOf(field{"content", encVal("hi")})
	env := envelopeFields(user)
	out := map[string][]byte{}
	add := func(name string, fs []field) { out[name] = mapOf(fs...) }

	add("map16 headers everywhere", env)
	add("fields in reverse order", func() []field {
		r := append([]field(nil), env...)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return r
	}())
	add("unknown envelope field of each type", append(append([]field(nil), env...),
		field{"x-str", encVal("s")}, field{"x-int", encVal(-5)}, field{"x-map", encVal(map[string]any{"a": []any{1, "b", nil, true, 1.5}})},
		field{"x-nil", encVal(nil)}, field{"x-bin", encVal([]byte{1, 2})}, field{"x-time", encVal(testTime)},
		field{"x-ext", enc(func(m *mp) { m.raw(0xc7, 3, 5, 1, 2, 3) })}, field{"x-float", encVal(2.5)}))
	add("unknown payload field", replaceField(env, "payload", mapOf(field{"content", encVal("hi")}, field{"extra", encVal([]int{1, 2})})))
	add("str8 and str16 strings", replaceField(replaceField(env, "id", enc(func(m *mp) { m.str8("abc") })), "tenant", enc(func(m *mp) { m.str16("acme") })))
	add("str8 key", append(dropField(env, "producer"), rawKey(enc(func(m *mp) { m.str8("producer") }), encVal("p"))))
	add("bin key", append(dropField(env, "producer"), rawKey(enc(func(m *mp) { m.bin("producer") }), encVal("p"))))
	for name, v := range map[string][]byte{
		"uint8": {0xcc, 1}, "uint16": {0xcd, 0, 1}, "uint32": {0xce, 0, 0, 0, 1}, "uint64": {0xcf, 0, 0, 0, 0, 0, 0, 0, 1},
		"int8": {0xd0, 1}, "int16": {0xd1, 0, 1}, "int32": {0xd2, 0, 0, 0, 1}, "int64": {0xd3, 0, 0, 0, 0, 0, 0, 0, 1},
		"negative fixint": {0xff}, "int8 -128": {0xd0, 0x80}, "uint64 max": {0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"newer": {0x02}, "nil": {0xc0}, "float": {0xca, 0x3f, 0x80, 0, 0}, "str": encVal("1"), "bool": {0xc3},
	} {
		add("schema version as "+name, replaceField(env, "v", v))
	}
	add("no schema version", dropField(env, "v"))
	add("unknown type", replaceField(env, "type", encVal("message.future")))
	add("no type", dropField(env, "type"))
	add("type as bin", replaceField(env, "type", enc(func(m *mp) { m.bin("message.user") })))
	add("id as bin", replaceField(env, "id", enc(func(m *mp) { m.bin("x") })))
	add("id as nil", replaceField(env, "id", encVal(nil)))
	add("id as int", replaceField(env, "id", encVal(7)))
	add("id twice", append(append([]field(nil), env...), field{"id", encVal("other")}))
	add("payload twice", append(append([]field(nil), env...), field{"payload", mapOf(field{"content", encVal("bye")})}))
	add("no payload", dropField(env, "payload"))
	add("payload nil", replaceField(env, "payload", encVal(nil)))
	add("payload empty map", replaceField(env, "payload", encVal(map[string]any{})))
	add("payload str", replaceField(env, "payload", encVal("x")))
	add("payload array", replaceField(env, "payload", encVal([]any{"hi", "", nil})))
	add("no time", dropField(env, "time"))
	add("time nil", replaceField(env, "time", encVal(nil)))
	add("time as string", replaceField(env, "time", encVal(testTime.Format(time.RFC3339Nano))))
	add("time as ext 13", replaceField(env, "time", enc(func(m *mp) { m.raw(0xd6, 13, 0, 0, 0, 1) })))
	add("time ext 16 bytes", replaceField(env, "time", enc(func(m *mp) { m.raw(0xd8, 0xff).raw(make([]byte, 16)...) })))
	add("time ext8 of 12 bytes", replaceField(env, "time", enc(func(m *mp) { m.raw(0xc7, 12, 0xff).raw(make([]byte, 12)...) })))
	add("time ext8 of 8 bytes", replaceField(env, "time", enc(func(m *mp) { m.raw(0xc7, 8, 0xff).raw(make([]byte, 8)...) })))
	add("time 64-bit with too many ns", replaceField(env, "time", enc(func(m *mp) { m.raw(0xd7, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1) })))
	add("time of the zero value", replaceField(env, "time", encVal(time.Time{})))
	add("time fixarray legacy", replaceField(env, "time", encVal([]int64{1, 2})))
	add("key nil", append(append([]field(nil), env...), rawKey([]byte{0xc0}, encVal("x"))))
	add("key int", append(append([]field(nil), env...), rawKey([]byte{0x01}, encVal("x"))))

	pay := func(name string, typ string, fs ...field) {
		add(name, replaceField(replaceField(env, "type", encVal(typ)), "payload", mapOf(fs...)))
	}
	pay("content nil", "message.user", field{"content", encVal(nil)})
	pay("content bin", "message.user", field{"content", enc(func(m *mp) { m.bin("hi") })})
	pay("content int", "message.user", field{"content", encVal(1)})
	pay("content empty parts", "message.user", field{"content", encVal([]any{})})
	pay("content parts", "message.user", field{"content", encVal([]map[string]string{{"type": "text", "text": "a", "other": "x"}, {"type": "image", "url": "u"}})})
	pay("content part nil", "message.user", field{"content", encVal([]any{nil})})
	pay("content part twice a field", "message.user", field{"content", enc(func(m *mp) { m.fixmap(2).str("text").str("a").str("text").str("b") })})
	pay("content too many parts", "message.user", field{"content", encVal(make([]map[string]string, 1025))})
	pay("metadata bin", "message.user", field{"content", encVal("x")}, field{"metadata", enc(func(m *mp) { m.bin(`{"a":1}`) })})
	pay("metadata str", "message.user", field{"content", encVal("x")}, field{"metadata", encVal(`{"a":1}`)})
	pay("metadata empty", "message.user", field{"content", encVal("x")}, field{"metadata", encVal("")})
	pay("metadata nil", "message.user", field{"content", encVal("x")}, field{"metadata", encVal(nil)})
	pay("metadata map", "message.user", field{"content", encVal("x")}, field{"metadata", encVal(map[string]int{"a": 1})})
	pay("name nil", "message.user", field{"content", encVal("x")}, field{"name", encVal(nil)})
	pay("content twice", "message.user", field{"content", encVal("x")}, field{"content", encVal("y")})
	pay("tool calls empty", "message.assistant", field{"content", encVal(nil)}, field{"tool_calls", encVal([]any{})})
	pay("tool calls nil", "message.assistant", field{"content", encVal(nil)}, field{"tool_calls", encVal(nil)})
	pay("tool call nil", "message.assistant", field{"content", encVal(nil)}, field{"tool_calls", encVal([]any{nil})})
	pay("tool call as array", "message.assistant", field{"content", encVal(nil)}, field{"tool_calls", encVal([][]string{{"a", "b", "c"}})})
	pay("tool call unknown field", "message.assistant", field{"content", encVal(nil)}, field{"tool_calls", encVal([]map[string]any{{"id": "1", "name": "n", "arguments": "{}", "x": 1}})})
	pay("assistant metadata empty", "message.assistant", field{"content", encVal("a")}, field{"metadata", encVal("")})
	pay("assistant metadata bin empty", "message.assistant", field{"content", encVal("a")}, field{"metadata", enc(func(m *mp) { m.bin("") })})
	pay("usage nil", "message.assistant", field{"content", encVal("a")}, field{"usage", encVal(nil)})
	pay("usage empty", "message.assistant", field{"content", encVal("a")}, field{"usage", encVal(map[string]any{})})
	pay("usage negative and wide", "message.assistant", field{"content", encVal("a")}, field{"usage", encVal(map[string]any{"input_tokens": -3, "output_tokens": uint64(1 << 63), "total_tokens": int8(-1)})})
	pay("usage float", "message.assistant", field{"content", encVal("a")}, field{"usage", encVal(map[string]any{"input_tokens": 1.5})})
	pay("is_error nil", "tool.result", field{"tool_call_id", encVal("c")}, field{"is_error", encVal(nil)})
	pay("is_error int", "tool.result", field{"tool_call_id", encVal("c")}, field{"is_error", encVal(1)})
	pay("is_error false", "tool.result", field{"tool_call_id", encVal("c")}, field{"is_error", encVal(false)})
	pay("up_to_seq negative", "thread.compacted", field{"up_to_seq", encVal(-1)}, field{"summary", encVal("s")})
	pay("up_to_seq int16 negative", "thread.compacted", field{"up_to_seq", enc(func(m *mp) { m.raw(0xd1, 0xff, 0x00) })}, field{"summary", encVal("s")})
	pay("up_to_seq nil", "thread.compacted", field{"up_to_seq", encVal(nil)}, field{"summary", encVal("s")})
	pay("state value bin empty", "state.set", field{"key", encVal("k")}, field{"value", enc(func(m *mp) { m.bin("") })})
	pay("state value nil", "state.set", field{"key", encVal("k")}, field{"value", encVal(nil)})
	pay("state value missing", "state.set", field{"key", encVal("k")})
	pay("metadata map nil", "thread.created", field{"metadata", encVal(nil)})
	pay("metadata map empty", "thread.created", field{"metadata", encVal(map[string]string{})})
	pay("metadata map repeated key", "thread.created", field{"metadata", enc(func(m *mp) { m.fixmap(2).str("a").str("1").str("a").str("2") })})
	pay("metadata map int value", "thread.created", field{"metadata", encVal(map[string]int{"a": 1})})
	pay("metadata map nil value", "thread.created", field{"metadata", encVal(map[string]any{"a": nil})})
	pay("system prompt nil", "thread.created", field{"system_prompt", encVal(nil)})
	pay("system prompt empty", "thread.created", field{"system_prompt", encVal("")})
	pay("updated pointers nil", "thread.updated", field{"title", encVal(nil)}, field{"agent", encVal(nil)}, field{"system_prompt", encVal(nil)})
	pay("updated metadata map empty", "thread.updated", field{"metadata", encVal(map[string]string{})})
	pay("redacted fields empty", "event.redacted", field{"seq", encVal(3)}, field{"event_id", encVal("e")}, field{"fields", encVal([]string{})})
	pay("restore message lists empty", "thread.restored", field{"messages", encVal([]map[string]any{{"role": "assistant", "content": "a", "tool_calls": []any{}, "metadata": ""}})})
	pay("restore messages nil", "thread.restored", field{"messages", encVal(nil)})
	pay("restore messages empty", "thread.restored", field{"messages", encVal([]any{})})
	pay("restore message time nil", "thread.restored", field{"messages", encVal([]map[string]any{{"role": "user", "content": "a", "time": nil}})})
	pay("restore message time ext 13", "thread.restored", field{"messages", enc(func(m *mp) {
		m.raw(0x91).fixmap(3).str("role").str("user").str("content").str("a").str("time").raw(0xd6, 13, 0, 0, 0, 1)
	})})
	pay("restore message unknown role", "thread.restored", field{"messages", encVal([]map[string]any{{"role": "robot", "content": []any{}}})})
	pay("forked state values", "thread.forked", field{"source_tenant", encVal("t")}, field{"state", enc(func(m *mp) {
		m.fixmap(4).str("a").bin("1").str("b").str("2").str("c").raw(0xc0).str("d").bin("")
	})})
	pay("forked state empty", "thread.forked", field{"state", encVal(map[string]any{})})
	pay("forked state int value", "thread.forked", field{"state", encVal(map[string]int{"a": 1})})
	pay("forked created nil", "thread.forked", field{"created", encVal(nil)})
	pay("forked created metadata empty", "thread.forked", field{"created", encVal(map[string]any{"metadata": map[string]string{}})})
	pay("erased counts wide", "thread.erased", field{"removed_events", enc(func(m *mp) { m.raw(0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0) })}, field{"last_seq", enc(func(m *mp) { m.raw(0xce, 0xff, 0xff, 0xff, 0xff) })})
	pay("payload key bin", "thread.reset", rawKey(enc(func(m *mp) { m.bin("reason") }), encVal("why")))
	pay("payload key nil", "thread.reset", rawKey([]byte{0xc0}, encVal("why")))
	return out
}

// Inputs Marshal never writes decode the same both ways: the hand-written
// decoder takes the valid forms it knows and leaves the rest to the
// reflection decoder, whose answer (event or error) stands.
func TestDecodeFastMatchesReflectionOnOtherEncodings(t *testing.T) {
	fast := 0
	for name, b := range wireVariants() {
		t.Run(name, func(t *testing.T) {
			if requireSameDecode(t, b) {
				fast++
			}
			// Every prefix and a trailing byte are errors both ways.
			for i := range len(b) {
				requireSameDecode(t, b[:i])
			}
			requireSameDecode(t, append(append([]byte(nil), b...), 0xc0))
		})
	}
	// The forms the hand-written decoder is meant to take (other integer
	// widths, map16, str8/16, unknown fields, nil pointers...) do not fall
	// back.
	require.Greater(t, fast, 50)
}

// Some of the variants above must take the hand-written path; this pins
// which, so a change that quietly sends them to the fallback is seen.
func TestDecodeFastTakesTheValidForms(t *testing.T) {
	v := wireVariants()
	for _, name := range []string{
		"map16 headers everywhere", "fields in reverse order", "unknown envelope field of each type", "unknown payload field",
		"str8 and str16 strings", "str8 key", "schema version as uint64", "schema version as int8 -128", "schema version as negative fixint",
		"no schema version", "time ext8 of 12 bytes", "time 64-bit with too many ns", "time of the zero value",
		"content nil", "content empty parts", "content parts", "metadata bin", "metadata empty", "metadata nil",
		"tool calls empty", "usage negative and wide", "is_error nil", "up_to_seq negative", "up_to_seq int16 negative",
		"state value bin empty", "state value nil", "metadata map repeated key", "metadata map nil", "system prompt nil",
		"restore messages nil", "restore messages empty", "forked state values", "forked created metadata empty",
		"erased counts wide",
	} {
		b, ok := v[name]
		require.True(t, ok, name)
		require.True(t, requireSameDecode(t, b), "%s: the hand-written decoder fell back", name)
	}
}

// FuzzDecodeFast compares the hand-written decoder with the reflection
// decoder on arbitrary bytes: the same event or the same error.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range unmarshalSeeds(f) {
		f.Add(s)
	}
	for _, b := range wireVariants() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		requireSameDecode(t, b)
	})
}

// benchEvents are typical events of a conversation: messages with 512
// bytes of text, an assistant turn with tool calls, a tool result.
func benchEvents() map[string][]byte {
	text := strings.Repeat("the quick brown fox jumps over the lazy dog ", 12)[:512]
	base := events.Event{ID: "01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b", Tenant: "default", Thread: "t-1", Time: testTime,
		Producer: "convlog-bench", SchemaVersion: events.SchemaVersion}
	out := map[string][]byte{}
	for name, p := range map[string]events.Payload{
		"user-512":      events.UserMessage{Content: events.Text(text)},
		"assistant-512": events.AssistantMessage{Content: events.Text(text), Agent: "demo", Model: "offline"},
		"assistant-tools": events.AssistantMessage{Content: events.Text("checking"), ToolCalls: []events.ToolCall{
			{ID: "call_1", Name: "lookup", Arguments: `{"q":"x"}`}, {ID: "call_2", Name: "calc", Arguments: `{"e":"1+1"}`}},
			Usage: &events.Usage{InputTokens: 100, OutputTokens: 20, TotalTokens: 120}, Model: "gpt-4o"},
		"tool-result": events.ToolResult{ToolCallID: "call_1", Name: "lookup", Content: events.Text(`{"ok":true}`)},
		"restore-5":   events.Restore{Messages: richMessages()},
	} {
		e := base
		e.Type, e.Payload = p.EventType(), p
		b, err := events.Marshal(e)
		if err != nil {
			panic(err)
		}
		out[name] = b
	}
	return out
}

// BenchmarkUnmarshal compares the reflection decoder with Unmarshal (the
// hand-written decoder) per event type.
func BenchmarkUnmarshal(b *testing.B) {
	evs := benchEvents()
	for _, name := range []string{"user-512", "assistant-512", "assistant-tools", "tool-result", "restore-5"} {
		data := evs[name]
		for _, dec := range []struct {
			name string
			fn   func([]byte) (events.Event, error)
		}{{"reflection", events.UnmarshalReflect}, {"hand-written", events.Unmarshal}} {
			b.Run(fmt.Sprintf("%s/%s", name, dec.name), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					if _, err := dec.fn(data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// A nil where a time belongs made msgpack/v5 panic inside Unmarshal (a
// hostile or buggy writer could stop every projector with one event): it
// is a decode error, in the envelope and in a message of a payload.
func TestUnmarshalRejectsNilTimeWithoutPanicking(t *testing.T) {
	v := wireVariants()
	_, err := events.Unmarshal(v["time nil"])
	require.ErrorIs(t, err, events.ErrDecode)
	e, err := events.Unmarshal(v["restore message time nil"])
	require.ErrorIs(t, err, events.ErrDecode)
	require.Equal(t, events.TypeRestore, e.Type, "the envelope is still returned")
	require.Nil(t, e.Payload)
}
