package events

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

func codecSamples() []Message {
	now := time.Date(2026, 11, 22, 8, 0, 0, 123456789, time.UTC)
	return []Message{
		{Role: RoleUser, Content: Text("hi"), Seq: 1, EventID: "e1", Time: now},
		{Role: RoleUser, Content: Text(""), Name: "bob", Metadata: json.RawMessage(`{"a":1}`)},
		{Role: RoleAssistant, Reasoning: "think", ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: `{"x":1}`}, {ID: "c2", Name: "g", Arguments: "{}"}},
			Agent: "a", Model: "m", Usage: &Usage{InputTokens: 3, OutputTokens: 1 << 40, TotalTokens: -5}, Seq: 1 << 33, Time: now.Add(time.Hour)},
		{Role: RoleTool, ToolCallID: "c1", Name: "f", Content: Text(strings.Repeat("é", 40_000)), IsError: true, Synthetic: true, Seq: 300},
		{Role: RoleUser, Content: Parts(Part{Type: PartText, Text: "look"},
			Part{Type: PartImage, URL: "https://x/y.png", Detail: "low"},
			Part{Type: PartFile, Data: "AAAA", MediaType: "application/pdf", Filename: "f.pdf", FileID: "id"})},
		{Role: RoleUser, Content: Content{Kind: ContentParts, Parts: []Part{}}},
		{Role: RoleSystem, Content: Text(strings.Repeat("x", 70_000)), Time: time.Unix(1<<35, 5).UTC(), Seq: 70000},
		{Role: RoleAssistant, Usage: &Usage{}, Time: time.Unix(100, 0).UTC()},
	}
}

// The fast codec and the msgpack library read each other's bytes: a chunk
// is plain msgpack of []Message.
func TestMessageCodecAgreesWithTheMsgpackLibrary(t *testing.T) {
	ms := codecSamples()
	fast := AppendMessages(nil, ms)

	var sizes []int
	got, err := parseMessages(fast, &sizes)
	require.NoError(t, err)
	require.Equal(t, ms, got)
	for i := range ms {
		require.Equal(t, len(AppendMessage(nil, &ms[i])), sizes[i], "message %d", i)
	}

	slow, err := decodeMessagesSlow(fast)
	require.NoError(t, err)
	require.Equal(t, ms, slow)

	lib, err := msgpack.Marshal(ms)
	require.NoError(t, err)
	got, err = parseMessages(lib, nil)
	require.NoError(t, err)
	require.Equal(t, ms, got)

	dst := make([]Message, len(ms))
	require.NoError(t, ParseMessagesInto(fast, dst))
	require.Equal(t, ms, dst)
	require.Error(t, ParseMessagesInto(fast, make([]Message, 2)))
}

func TestMessageCodecRejectsTruncatedBytes(t *testing.T) {
	b := AppendMessages(nil, codecSamples())
	for i := 0; i < len(b); i += 97 {
		_, err := parseMessages(b[:i], nil)
		require.Error(t, err, "prefix of %d bytes", i)
	}
}

func FuzzParseMessages(f *testing.F) {
	f.Add(AppendMessages(nil, codecSamples()))
	f.Add([]byte{0x91, 0x80})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := parseMessages(b, nil)
		if err == nil {
			// What decodes re-encodes and decodes to the same messages.
			again, err := parseMessages(AppendMessages(nil, ms), nil)
			require.NoError(t, err)
			require.Equal(t, len(ms), len(again))
		}
	})
}

// benchMessages is a list of n messages shaped like a conversation: a
// user question, an assistant step with a tool call and usage, the tool's
// result, and a final answer, each text of about size bytes.
func benchMessages(n, size int) []Message {
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	text := func(i int) string {
		s := "message " + strings.Repeat("abcdefgh ", size/9)
		return s[:min(len(s), size)] + string(rune('a'+i%26))
	}
	ms := make([]Message, n)
	for i := range ms {
		m := Message{Seq: uint64(i + 1), EventID: "0193f0c4-5d6e-7b4a-9c1d-2e3f4a5b6c" + string(rune('a'+i%26)) + "d", Time: now.Add(time.Duration(i) * time.Second)}
		switch i % 4 {
		case 0:
			m.Role, m.Content = RoleUser, Text(text(i))
		case 1:
			m.Role, m.Agent, m.Model = RoleAssistant, "demo", "gpt-4o"
			m.ToolCalls = []ToolCall{{ID: "call_" + string(rune('a'+i%26)), Name: "lookup", Arguments: `{"query":"` + text(i)[:40] + `"}`}}
			m.Usage = &Usage{InputTokens: 1200, OutputTokens: 40, TotalTokens: 1240}
		case 2:
			m.Role, m.ToolCallID, m.Name, m.Content = RoleTool, "call_"+string(rune('a'+(i-1)%26)), "lookup", Text(text(i))
		case 3:
			m.Role, m.Agent, m.Model, m.Content = RoleAssistant, "demo", "gpt-4o", Text(text(i))
			m.Usage = &Usage{InputTokens: 1300, OutputTokens: 90, TotalTokens: 1390}
		}
		ms[i] = m
	}
	return ms
}

// BenchmarkMessageList measures the message-list codec against the
// reflection-based msgpack/v5 codec (the baseline) on 1,000 messages of
// about 512 bytes of text (a 600 KB chunk), and the event decoder on the
// same messages inside a restore event:
//
//	go test ./events -run '^$' -bench MessageList -count 6
//
// decode/reflection is msgpack.Unmarshal into []Message; decode/codec is
// DecodeMessages (strings copied); decode/codec-alias is ParseMessages
// with strings sharing the bytes (snapshot reads); decode/codec-into is
// ParseMessagesInto a slice that exists (a Load with its chunk hint);
// decode/event-restore is Unmarshal of a restore event holding the list
// (the event decoder's fast path). encode/reflection is msgpack.Marshal,
// encode/codec AppendMessages.
func BenchmarkMessageList(b *testing.B) {
	ms := benchMessages(1000, 512)
	data := AppendMessages(nil, ms)
	ev, err := Marshal(Event{ID: NewID(), Type: TypeRestore, SchemaVersion: SchemaVersion, Tenant: "acme", Thread: "t1", Time: time.Now().UTC(), Payload: Restore{Messages: ms, Reason: "bench"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode/reflection", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var out []Message
			if err := msgpack.Unmarshal(data, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/codec", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := DecodeMessages(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/codec-alias", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := ParseMessages(data, nil, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/codec-into", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		into := make([]Message, len(ms))
		for b.Loop() {
			if err := ParseMessagesInto(data, into); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/event-restore", func(b *testing.B) {
		b.SetBytes(int64(len(ev)))
		for b.Loop() {
			if _, err := Unmarshal(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/reflection", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := msgpack.Marshal(ms); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/codec", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		buf := make([]byte, 0, len(data))
		for b.Loop() {
			buf = AppendMessages(buf[:0], ms)
		}
	})
}
