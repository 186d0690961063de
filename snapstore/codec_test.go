package snapstore

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/events"
)

func codecSamples() []events.Message {
	now := time.Date(2026, 11, 22, 8, 0, 0, 123456789, time.UTC)
	return []events.Message{
		{Role: events.RoleUser, Content: events.Text("hi"), Seq: 1, EventID: "e1", Time: now},
		{Role: events.RoleUser, Content: events.Text(""), Name: "bob", Metadata: json.RawMessage(`{"a":1}`)},
		{Role: events.RoleAssistant, Reasoning: "think", ToolCalls: []events.ToolCall{{ID: "c1", Name: "f", Arguments: `{"x":1}`}, {ID: "c2", Name: "g", Arguments: "{}"}},
			Agent: "a", Model: "m", Usage: &events.Usage{InputTokens: 3, OutputTokens: 1 << 40, TotalTokens: -5}, Seq: 1 << 33, Time: now.Add(time.Hour)},
		{Role: events.RoleTool, ToolCallID: "c1", Name: "f", Content: events.Text(strings.Repeat("é", 40_000)), IsError: true, Synthetic: true, Seq: 300},
		{Role: events.RoleUser, Content: events.Parts(events.Part{Type: events.PartText, Text: "look"},
			events.Part{Type: events.PartImage, URL: "https://x/y.png", Detail: "low"},
			events.Part{Type: events.PartFile, Data: "AAAA", MediaType: "application/pdf", Filename: "f.pdf", FileID: "id"})},
		{Role: events.RoleUser, Content: events.Content{Kind: events.ContentParts, Parts: []events.Part{}}},
		{Role: events.RoleSystem, Content: events.Text(strings.Repeat("x", 70_000)), Time: time.Unix(1<<35, 5).UTC(), Seq: 70000},
		{Role: events.RoleAssistant, Usage: &events.Usage{}, Time: time.Unix(100, 0).UTC()},
	}
}

// The fast codec and the msgpack library read each other's bytes: a chunk
// is plain msgpack of []events.Message.
func TestMessageCodecAgreesWithTheMsgpackLibrary(t *testing.T) {
	ms := codecSamples()
	fast := appendMessages(nil, ms)

	var sizes []int
	got, err := parseMessages(fast, &sizes)
	require.NoError(t, err)
	require.Equal(t, ms, got)
	for i := range ms {
		require.Equal(t, len(appendMessage(nil, &ms[i])), sizes[i], "message %d", i)
	}

	slow, err := decodeMessagesSlow(fast)
	require.NoError(t, err)
	require.Equal(t, ms, slow)

	lib, err := msgpack.Marshal(ms)
	require.NoError(t, err)
	got, err = parseMessages(lib, nil)
	require.NoError(t, err)
	require.Equal(t, ms, got)

	dst := make([]events.Message, len(ms))
	require.NoError(t, parseMessagesInto(fast, dst))
	require.Equal(t, ms, dst)
	require.Error(t, parseMessagesInto(fast, make([]events.Message, 2)))
}

func TestMessageCodecRejectsTruncatedBytes(t *testing.T) {
	b := appendMessages(nil, codecSamples())
	for i := 0; i < len(b); i += 97 {
		_, err := parseMessages(b[:i], nil)
		require.Error(t, err, "prefix of %d bytes", i)
	}
}

func FuzzParseMessages(f *testing.F) {
	f.Add(appendMessages(nil, codecSamples()))
	f.Add([]byte{0x91, 0x80})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := parseMessages(b, nil)
		if err == nil {
			// What decodes re-encodes and decodes to the same messages.
			again, err := parseMessages(appendMessages(nil, ms), nil)
			require.NoError(t, err)
			require.Equal(t, len(ms), len(again))
		}
	})
}

// BenchmarkDecodeChunk splits what a Load spends on a 1,000-message chunk
// (512-byte texts) besides the transfer: decoding into a slice that exists
// already, allocating that slice as Load must (it is returned to the
// caller), and, for scale, allocating and copying the chunk's bytes as the
// NATS client does with every message it receives.
func BenchmarkDecodeChunk(b *testing.B) {
	data := appendMessages(nil, layoutMsgs(1, 1000, 512))
	b.Run("decode", func(b *testing.B) {
		into := make([]events.Message, 1000)
		for b.Loop() {
			if err := parseMessagesInto(data, into); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("allocate+decode", func(b *testing.B) {
		for b.Loop() {
			into := make([]events.Message, 1000)
			if err := parseMessagesInto(data, into); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("copy-bytes", func(b *testing.B) {
		for b.Loop() {
			c := make([]byte, len(data))
			copy(c, data)
		}
	})
}
