package events_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/events"
)

// msgpackRoundTrip encodes e with events.Marshal and decodes it again.
func msgpackRoundTrip(t *testing.T, e events.Event) events.Event {
	t.Helper()
	b, err := events.Marshal(e)
	require.NoError(t, err)
	got, err := events.Unmarshal(b)
	require.NoError(t, err)
	return got
}

// jsonRoundTrip encodes e with Event.MarshalJSON and decodes it with
// encoding/json (which calls Event.UnmarshalJSON).
func jsonRoundTrip(t *testing.T, e events.Event) events.Event {
	t.Helper()
	b, err := e.MarshalJSON()
	require.NoError(t, err)
	require.True(t, json.Valid(b), string(b))
	var got events.Event
	require.NoError(t, json.Unmarshal(b, &got), string(b))
	return got
}

func TestEveryEventTypeRoundTripsThroughMsgpackAndJSON(t *testing.T) {
	for name, set := range map[string]map[events.Type]events.Event{"rich": sampleEvents(), "minimal": minimalEvents()} {
		for _, typ := range events.AllTypes {
			e := set[typ]
			t.Run(name+"/"+string(typ), func(t *testing.T) {
				assert.Equal(t, e, msgpackRoundTrip(t, e), "msgpack")
				assert.Equal(t, e, jsonRoundTrip(t, e), "json")
			})
		}
	}
}

func TestTheTypeHeaderAndTheEncodedTypeAgree(t *testing.T) {
	for _, e := range sampleEvents() {
		h := events.Headers(e)
		assert.Equal(t, string(e.Type), h[events.HeaderType])
		assert.Equal(t, "1", h[events.HeaderSchema])
		assert.Equal(t, e.ID, h[events.HeaderMsgID])

		b, err := events.Marshal(e)
		require.NoError(t, err)
		var env map[string]any
		require.NoError(t, msgpack.Unmarshal(b, &env))
		assert.Equal(t, string(e.Type), env["type"])
		assert.IsType(t, map[string]any{}, env["payload"], "the payload is a nested msgpack map")
	}
}

// Content has three shapes, and each must come back as exactly that shape:
// null is not "", and "" is not null, in both encodings.
func TestContentShapesSurviveBothEncodings(t *testing.T) {
	cases := []struct {
		name    string
		content events.Content
	}{
		{"null content stays null", events.Content{}},
		{"empty text stays empty text, not null", events.Text("")},
		{"text with control bytes and non-ASCII stays byte for byte", events.Text("a\r\nb\bc\x00d\u2028é漢字🙂\"\\</script>")},
		{"a single text part stays a part", events.Parts(events.Part{Type: events.PartText, Text: "hi"})},
		{"an empty text part keeps its type", events.Parts(events.Part{Type: events.PartText})},
		{"mixed parts keep order and every field", events.Parts(
			events.Part{Type: events.PartImage, URL: "data:image/png;base64,AAAA", Detail: "high"},
			events.Part{Type: events.PartText, Text: "caption"},
			events.Part{Type: events.PartFile, Data: "JVBERi0=", MediaType: "application/pdf", Filename: "a.pdf"},
			events.Part{Type: events.PartFile, URL: "s3://bucket/key"},
		)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, p := range []events.Payload{
				events.ToolResult{ToolCallID: "c1", Content: c.content},
				events.UserMessage{Content: c.content},
				events.AssistantMessage{Content: c.content},
				events.Compaction{UpToSeq: 3, Summary: c.content},
				events.Restore{Messages: []events.Message{{Role: events.RoleUser, Content: c.content}}},
			} {
				e := envelope(p)
				m := msgpackRoundTrip(t, e)
				j := jsonRoundTrip(t, e)
				assert.Equal(t, e, m, "msgpack %T", p)
				assert.Equal(t, e, j, "json %T", p)
			}
		})
	}
}

// A parts content with no parts is still parts content ("[]"), never null
// and never "". Both decoders give an empty non-nil Parts slice, as
// events.Parts() builds it, so that round-trips exactly; a hand-built nil
// slice comes back empty, which Content.Equal treats as the same.
func TestEmptyPartsStayParts(t *testing.T) {
	require.NotNil(t, events.Parts().Parts)
	for _, c := range []events.Content{events.Parts(), {Kind: events.ContentParts}} {
		e := envelope(events.ToolResult{ToolCallID: "c1", Content: c})
		for name, got := range map[string]events.Event{"msgpack": msgpackRoundTrip(t, e), "json": jsonRoundTrip(t, e)} {
			gc := got.Payload.(events.ToolResult).Content
			assert.Equal(t, events.ContentParts, gc.Kind, name)
			assert.Equal(t, []events.Part{}, gc.Parts, name)
			assert.True(t, gc.Equal(c), name)
		}
		b, err := e.MarshalJSON()
		require.NoError(t, err)
		assert.Contains(t, string(b), `"content":[]`)
	}
}

// Empty maps, slices and raw JSON values are omitted on the wire and decode
// as nil: the decoded event is canonical, so re-encoding it gives the same
// bytes and the fold never sees two shapes of "nothing".
func TestEmptyCollectionsDecodeAsNil(t *testing.T) {
	cases := []struct {
		name string
		in   events.Payload
		want events.Payload
	}{
		{"an empty metadata map on thread.created decodes as nil",
			events.ThreadCreated{Metadata: map[string]string{}}, events.ThreadCreated{}},
		{"an empty metadata map on thread.updated decodes as nil",
			events.ThreadUpdated{Metadata: map[string]string{}}, events.ThreadUpdated{}},
		{"an empty tool call list decodes as nil",
			events.AssistantMessage{Content: events.Text("x"), ToolCalls: []events.ToolCall{}}, events.AssistantMessage{Content: events.Text("x")}},
		{"empty raw metadata on a user message decodes as nil",
			events.UserMessage{Content: events.Text("x"), Metadata: json.RawMessage{}}, events.UserMessage{Content: events.Text("x")}},
		{"an empty fork state decodes as nil",
			events.Forked{SourceTenant: "a", SourceThread: "b", SourceSeq: 1, State: map[string]json.RawMessage{}},
			events.Forked{SourceTenant: "a", SourceThread: "b", SourceSeq: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := envelope(c.want)
			assert.Equal(t, want, msgpackRoundTrip(t, envelope(c.in)), "msgpack")
			assert.Equal(t, want, jsonRoundTrip(t, envelope(c.in)), "json")
		})
	}
}

// Restore and Forked carry a message list that is required on the wire:
// nil stays nil (msgpack nil, JSON null) and an empty list stays an empty
// list, so "no messages" and "the empty history" stay distinguishable.
func TestMessageListsKeepNilVersusEmpty(t *testing.T) {
	for _, msgs := range [][]events.Message{nil, {}} {
		for _, p := range []events.Payload{
			events.Restore{Messages: msgs},
			events.Forked{SourceTenant: "a", SourceThread: "b", SourceSeq: 1, Messages: msgs},
		} {
			e := envelope(p)
			assert.Equal(t, e, msgpackRoundTrip(t, e), "msgpack %T %#v", p, msgs)
			assert.Equal(t, e, jsonRoundTrip(t, e), "json %T %#v", p, msgs)
		}
	}
}

// Times come back in UTC with every nanosecond, whatever zone they were
// written in; message times inside Restore and Forked payloads too.
func TestTimesComeBackInUTCWithNanoseconds(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("UTC+5:30", 5*3600+1800), time.FixedZone("UTC-8", -8*3600)}
	for _, loc := range zones {
		for _, ts := range []time.Time{
			testTime.In(loc),
			time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC).In(loc),
			time.Date(2262, 4, 11, 23, 47, 16, 854775807, time.UTC).In(loc),
			time.Date(9999, 12, 30, 23, 59, 59, 1, time.UTC).In(loc),
		} {
			e := envelope(events.Restore{Messages: []events.Message{{Role: events.RoleUser, Content: events.Text("x"), Time: ts}}})
			e.Time = ts
			for name, got := range map[string]events.Event{"msgpack": msgpackRoundTrip(t, e), "json": jsonRoundTrip(t, e)} {
				assert.True(t, got.Time.Equal(ts), "%s: %s != %s", name, got.Time, ts)
				assert.Equal(t, time.UTC, got.Time.Location(), name)
				assert.Equal(t, ts.UTC(), got.Time, name)
				mt := got.Payload.(events.Restore).Messages[0].Time
				assert.Equal(t, ts.UTC(), mt, "%s message time", name)
				assert.Equal(t, time.UTC, mt.Location(), "%s message time", name)
			}
		}
	}
	// A time with a monotonic reading (time.Now) encodes its wall time only.
	now := time.Now()
	e := envelope(events.Reset{})
	e.Time = now
	for _, got := range []events.Event{msgpackRoundTrip(t, e), jsonRoundTrip(t, e)} {
		assert.True(t, got.Time.Equal(now))
		assert.Equal(t, now.Round(0).UTC(), got.Time)
	}
}

// Raw JSON values (message metadata, state values, fork state) are kept
// byte for byte in msgpack. The JSON form embeds them as JSON, so their
// value survives but insignificant whitespace is compacted away.
func TestRawJSONValuesKeepTheirBytesInMsgpackAndTheirValueInJSON(t *testing.T) {
	raws := []string{`null`, `0`, `-1.5e300`, `"s\u00e9"`, `[]`, `{}`, `true`,
		"{ \"a\" : [1, 2,\n 3], \"b\": {\"<\": \"&\"} }", `{"big":123456789012345678901234567890}`}
	for _, raw := range raws {
		e := envelope(events.StateSet{Key: "k", Value: json.RawMessage(raw)})
		got := msgpackRoundTrip(t, e)
		assert.Equal(t, raw, string(got.Payload.(events.StateSet).Value), "msgpack keeps the bytes")

		j := jsonRoundTrip(t, e)
		var compact bytes.Buffer
		require.NoError(t, json.Compact(&compact, []byte(raw)))
		assert.Equal(t, compact.String(), string(j.Payload.(events.StateSet).Value), "json keeps the value")

		u := envelope(events.UserMessage{Content: events.Text("x"), Metadata: json.RawMessage(raw)})
		assert.Equal(t, raw, string(msgpackRoundTrip(t, u).Payload.(events.UserMessage).Metadata))
	}
}

func TestTheJSONFormHasTheDocumentedFieldNames(t *testing.T) {
	e := sampleEvents()[events.TypeAssistantMessage]
	b, err := e.MarshalJSON()
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"id", "type", "tenant", "thread", "time", "producer", "causation_id", "correlation_id", "v", "payload"} {
		assert.Contains(t, m, k)
	}
	assert.Equal(t, "2025-03-14T15:09:26.535897932Z", m["time"])
	assert.Equal(t, float64(1), m["v"])
	p := m["payload"].(map[string]any)
	assert.Equal(t, `{"order_id": "#W123"}`, p["tool_calls"].([]any)[0].(map[string]any)["arguments"], "arguments stay a string, byte for byte")
	assert.NotContains(t, string(b), `\u003c`, "no HTML escaping")

	min := minimalEvents()[events.TypeReset]
	b, err = min.MarshalJSON()
	require.NoError(t, err)
	assert.NotContains(t, string(b), "causation_id", "optional envelope fields are omitted when empty")
	assert.NotContains(t, string(b), "correlation_id")
}

// Marshal must be deterministic: the golden vectors, de-duplication by
// content and hashing of events depend on it.
func TestMarshalIsDeterministic(t *testing.T) {
	md := map[string]string{}
	state := map[string]json.RawMessage{}
	for i := range 300 {
		md[fmt.Sprintf("key-%03d-%s", i, strings.Repeat("x", i%7))] = fmt.Sprint(i)
		state[fmt.Sprintf("s%d", i)] = json.RawMessage(fmt.Sprint(i))
	}
	evs := []events.Event{
		envelope(events.ThreadCreated{Metadata: md}),
		envelope(events.ThreadUpdated{Metadata: md}),
		envelope(events.Forked{SourceTenant: "a", SourceThread: "b", SourceSeq: 1, Created: events.ThreadCreated{Metadata: md}, State: state}),
	}
	for _, e := range sampleEvents() {
		evs = append(evs, e)
	}
	for _, e := range evs {
		first, err := events.Marshal(e)
		require.NoError(t, err)
		firstJSON, err := e.MarshalJSON()
		require.NoError(t, err)
		for range 100 {
			b, err := events.Marshal(e)
			require.NoError(t, err)
			require.True(t, bytes.Equal(first, b), "msgpack of %s differs between runs", e.Type)
			j, err := e.MarshalJSON()
			require.NoError(t, err)
			require.Equal(t, string(firstJSON), string(j), "JSON of %s differs between runs", e.Type)
		}
	}

	// The same map built in another insertion order encodes the same.
	md2 := map[string]string{}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	for i := len(keys) - 1; i >= 0; i-- {
		md2[keys[i]] = md[keys[i]]
	}
	a, err := events.Marshal(envelope(events.ThreadCreated{Metadata: md}))
	require.NoError(t, err)
	b, err := events.Marshal(envelope(events.ThreadCreated{Metadata: md2}))
	require.NoError(t, err)
	require.Equal(t, a, b)
}

// Decoding a decoded event's encoding gives the same bytes: the encoding
// of a decoded event is canonical.
func TestReencodingADecodedEventGivesTheSameBytes(t *testing.T) {
	for _, set := range []map[events.Type]events.Event{sampleEvents(), minimalEvents()} {
		for _, e := range set {
			b, err := events.Marshal(e)
			require.NoError(t, err)
			got, err := events.Unmarshal(b)
			require.NoError(t, err)
			b2, err := events.Marshal(got)
			require.NoError(t, err)
			require.Equal(t, b, b2, "%s", e.Type)
		}
	}
}

func TestMarshalRefusesAnEventWithoutPayload(t *testing.T) {
	e := envelope(events.Reset{})
	e.Payload = nil
	_, err := events.Marshal(e)
	require.Error(t, err)
	_, err = e.MarshalJSON()
	require.Error(t, err)
	_, err = json.Marshal(e)
	require.Error(t, err)
}

// rawEvent encodes an envelope map by hand, to build inputs Marshal would
// never write.
func rawEvent(t *testing.T, fields map[string]any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	enc.SetSortMapKeys(true)
	require.NoError(t, enc.Encode(fields))
	return b.Bytes()
}

func baseFields() map[string]any {
	return map[string]any{
		"id": "01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b", "type": "thread.reset", "tenant": "acme", "thread": "t1",
		"time": testTime, "producer": "p", "v": 1, "payload": map[string]any{"reason": "r"},
	}
}

func with(m map[string]any, k string, v any) map[string]any {
	m[k] = v
	return m
}

func without(m map[string]any, k string) map[string]any {
	delete(m, k)
	return m
}

func TestUnmarshalReportsWhatItCannotDecode(t *testing.T) {
	good := rawEvent(t, baseFields())
	e, err := events.Unmarshal(good)
	require.NoError(t, err)
	require.Equal(t, events.Reset{Reason: "r"}, e.Payload)

	cases := []struct {
		name         string
		in           []byte
		want         error
		keepEnvelope bool
	}{
		{"empty input is a decode error", nil, events.ErrDecode, false},
		{"a msgpack string is not an event", []byte{0xa3, 'a', 'b', 'c'}, events.ErrDecode, false},
		{"truncated input is a decode error", good[:len(good)-3], events.ErrDecode, false},
		{"trailing bytes after the event are a decode error", append(append([]byte{}, good...), 0xc0), events.ErrDecode, false},
		{"an unknown type keeps the envelope", rawEvent(t, with(baseFields(), "type", "thread.exploded")), events.ErrUnknownType, true},
		{"a newer schema version keeps the envelope", rawEvent(t, with(baseFields(), "v", 2)), events.ErrNewerSchema, true},
		{"a missing payload is a decode error", rawEvent(t, without(baseFields(), "payload")), events.ErrDecode, true},
		{"a payload of the wrong shape is a decode error", rawEvent(t, with(baseFields(), "payload", "reason")), events.ErrDecode, true},
		{"a time that is not a timestamp is a decode error", rawEvent(t, with(baseFields(), "time", "yesterday")), events.ErrDecode, false},
		{"content of the wrong kind is a decode error",
			rawEvent(t, with(with(baseFields(), "type", "tool.result"), "payload", map[string]any{"tool_call_id": "c", "content": 42})), events.ErrDecode, true},
		{"a truncated array claiming four billion messages is a decode error, not an allocation",
			rawEvent(t, with(with(baseFields(), "type", "thread.restored"), "payload", msgpack.RawMessage{0x81, 0xa8, 'm', 'e', 's', 's', 'a', 'g', 'e', 's', 0xdd, 0xff, 0xff, 0xff, 0xff})),
			events.ErrDecode, false},
		{"a truncated map claiming four billion keys is a decode error",
			rawEvent(t, with(baseFields(), "payload", msgpack.RawMessage{0xdf, 0xff, 0xff, 0xff, 0xff})), events.ErrDecode, false},
		{"a truncated string claiming four gigabytes is a decode error",
			rawEvent(t, with(baseFields(), "payload", msgpack.RawMessage{0x81, 0xa6, 'r', 'e', 'a', 's', 'o', 'n', 0xdb, 0xff, 0xff, 0xff, 0xff})), events.ErrDecode, false},
		{"the unused byte 0xc1 is a decode error", []byte{0x81, 0xa1, 'x', 0xc1}, events.ErrDecode, false},
		{"maps and arrays nested 65 deep are a decode error",
			rawEvent(t, with(baseFields(), "extra", msgpack.RawMessage(append(bytes.Repeat([]byte{0x91}, 64), 0xc0)))), events.ErrDecode, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := events.Unmarshal(c.in)
			require.Error(t, err)
			require.ErrorIs(t, err, c.want)
			for _, other := range []error{events.ErrDecode, events.ErrUnknownType, events.ErrNewerSchema} {
				if other != c.want {
					require.False(t, errors.Is(err, other), "%v is also %v", err, other)
				}
			}
			if c.keepEnvelope {
				assert.Equal(t, "01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b", got.ID)
				assert.Equal(t, "acme", got.Tenant)
				assert.Equal(t, testTime, got.Time)
				assert.Contains(t, err.Error(), got.ID, "the error names the event")
			}
			assert.Nil(t, got.Payload)
		})
	}
}

func TestUnmarshalJSONReportsWhatItCannotDecode(t *testing.T) {
	base := `{"id":"01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b","type":%q,"tenant":"acme","thread":"t1","time":"2025-03-14T15:09:26.535897932Z","producer":"p","v":%d%s}`
	cases := []struct {
		name string
		in   string
		want error
	}{
		{"not JSON", `{"id":`, events.ErrDecode},
		{"an unknown type", fmt.Sprintf(base, "thread.exploded", 1, `,"payload":{}`), events.ErrUnknownType},
		{"a newer schema version", fmt.Sprintf(base, "thread.reset", 2, `,"payload":{}`), events.ErrNewerSchema},
		{"a missing payload", fmt.Sprintf(base, "thread.reset", 1, ``), events.ErrDecode},
		{"a null payload", fmt.Sprintf(base, "thread.reset", 1, `,"payload":null`), events.ErrDecode},
		{"a payload of the wrong shape", fmt.Sprintf(base, "thread.reset", 1, `,"payload":[1]`), events.ErrDecode},
		{"content that is a number", fmt.Sprintf(base, "tool.result", 1, `,"payload":{"tool_call_id":"c","content":42}`), events.ErrDecode},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e events.Event
			err := e.UnmarshalJSON([]byte(c.in))
			require.Error(t, err)
			require.ErrorIs(t, err, c.want)
			assert.Nil(t, e.Payload)
		})
	}
	var e events.Event
	require.NoError(t, json.Unmarshal(fmt.Appendf(nil, base, "thread.reset", 1, `,"payload":{"reason":"r"}`), &e))
	assert.Equal(t, events.Reset{Reason: "r"}, e.Payload)
	assert.Equal(t, testTime, e.Time)
}

// Nesting is bounded before decoding: eight megabytes of nested arrays used
// to overflow the decoder's stack (a fatal error that no recover catches)
// and one megabyte took seconds.
func TestDeeplyNestedInputIsRejectedQuickly(t *testing.T) {
	for _, n := range []int{63, 1 << 20, 8 << 20} {
		extra := append(bytes.Repeat([]byte{0x91}, n), 0xc0)
		b := rawEvent(t, with(baseFields(), "extra", msgpack.RawMessage(extra)))
		start := time.Now()
		e, err := events.Unmarshal(b)
		if n < 64 {
			require.NoError(t, err, "unknown fields nested within the limit are skipped")
			require.Equal(t, events.Reset{Reason: "r"}, e.Payload)
			continue
		}
		require.ErrorIs(t, err, events.ErrDecode)
		require.Contains(t, err.Error(), "nest more than 64 deep")
		require.Less(t, time.Since(start), time.Second)
	}
}

// A well-formed encoding with nothing left over and every length in range
// decodes; each way of cutting it short is an error, never a panic.
func TestEveryTruncationOfAnEventIsADecodeError(t *testing.T) {
	for _, e := range sampleEvents() {
		b, err := events.Marshal(e)
		require.NoError(t, err)
		for i := range len(b) {
			_, err := events.Unmarshal(b[:i])
			require.ErrorIs(t, err, events.ErrDecode, "%s cut at %d of %d", e.Type, i, len(b))
		}
	}
}

func TestNewFillsTheEnvelope(t *testing.T) {
	before := time.Now()
	e := events.New("acme", "t1", "svc", events.Reset{})
	assert.Equal(t, events.TypeReset, e.Type)
	assert.Equal(t, events.SchemaVersion, e.SchemaVersion)
	assert.Equal(t, time.UTC, e.Time.Location())
	assert.False(t, e.Time.Before(before.Truncate(time.Microsecond)))
	require.NoError(t, e.Validate())
	assert.NotEqual(t, e.ID, events.New("acme", "t1", "svc", events.Reset{}).ID)
	assert.Equal(t, byte('7'), e.ID[14], "ids are UUIDv7")
}

// Deltas are JSON only (they never enter the stream); their field names are
// part of the streaming contract.
func TestDeltaJSONShape(t *testing.T) {
	d := events.Delta{ReplyTo: "r", Step: 1, Agent: "a", Content: "tok", Reasoning: "why",
		ToolCall: &events.ToolCallDelta{Index: 0, ID: "c", Name: "f", Arguments: `{"a"`}, Done: true}
	b, err := json.Marshal(d)
	require.NoError(t, err)
	assert.JSONEq(t, `{"reply_to":"r","step":1,"agent":"a","content":"tok","reasoning":"why",
		"tool_call":{"index":0,"id":"c","name":"f","arguments":"{\"a\""},"done":true}`, string(b))
	var back events.Delta
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, d, back)

	b, err = json.Marshal(events.Delta{ReplyTo: "r"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"reply_to":"r","step":0}`, string(b))
}

// A stored event's JSON form is the event's JSON with seq and stored_at
// first, and it decodes back to the same stored event.
func TestStoredJSONRoundTrip(t *testing.T) {
	ev := events.New("acme", "th1", "test", events.UserMessage{Content: events.Text("hi")})
	st := events.Stored{Event: ev, Seq: 42, StoredAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	b, err := json.Marshal(st)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), `{"seq":42,"stored_at":"2026-01-02T03:04:05.000000006Z","id":"`), string(b))
	var back events.Stored
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, st.Seq, back.Seq)
	require.True(t, st.StoredAt.Equal(back.StoredAt))
	require.Equal(t, st.Event.Payload, back.Event.Payload)
	require.Equal(t, st.ID, back.ID)
}

// A payload decoded apart from its envelope is the payload of the event
// decoded whole, for every type.
func TestUnmarshalJSONPayloadDecodesAsTheEventDoes(t *testing.T) {
	for name, set := range map[string]map[events.Type]events.Event{"rich": sampleEvents(), "minimal": minimalEvents()} {
		for _, typ := range events.AllTypes {
			e := set[typ]
			t.Run(name+"/"+string(typ), func(t *testing.T) {
				b, err := json.Marshal(e)
				require.NoError(t, err)
				var parts struct {
					Payload json.RawMessage `json:"payload"`
				}
				require.NoError(t, json.Unmarshal(b, &parts))
				p, err := events.UnmarshalJSONPayload(typ, parts.Payload)
				require.NoError(t, err)
				assert.Equal(t, jsonRoundTrip(t, e).Payload, p)
			})
		}
	}
	_, err := events.UnmarshalJSONPayload("message.shout", []byte(`{}`))
	require.ErrorIs(t, err, events.ErrUnknownType)
	for _, b := range []string{"", " null ", `{"content": 5}`} {
		_, err := events.UnmarshalJSONPayload(events.TypeUserMessage, []byte(b))
		require.ErrorIs(t, err, events.ErrDecode, b)
	}
}
