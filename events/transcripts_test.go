package events_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/transcripts"
)

// rawLines returns the non-empty lines of a transcript file, each decoded
// only as far as its messages, each message as a map of raw JSON values.
// This is the reference the round trip is checked against: it does not go
// through events.OpenAIMessage.
func rawLines(t *testing.T, path string) []rawConversation {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var out []rawConversation
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var line rawConversation
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		out = append(out, line)
	}
	require.NoError(t, sc.Err())
	return out
}

// rawConversation is one transcript line, messages left as raw JSON.
type rawConversation struct {
	Meta     json.RawMessage              `json:"meta"`
	Messages []map[string]json.RawMessage `json:"messages"`
}

// jsonString decodes a raw JSON string value.
func jsonString(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(raw, &s), string(raw))
	return s
}

// loadConversations reads a transcript file through transcripts.Read.
func loadConversations(t testing.TB, path string) []events.Conversation {
	t.Helper()
	var convs []events.Conversation
	for c, err := range transcripts.Read(path) {
		require.NoError(t, err)
		convs = append(convs, c)
	}
	return convs
}

// quirks counts the features of the data the round trip must preserve, so
// the test proves it saw them.
type quirks struct {
	conversations, messages, toolCalls int
	nullContent, emptyContent          int
	nonASCII, cr, backspace, named     int
}

// Every message of every transcript converts to events, survives msgpack,
// and converts back to the identical OpenAI-format message, compared with
// the raw JSON of the source line.
func TestEveryTranscriptMessageRoundTripsThroughEvents(t *testing.T) {
	set := transcripts.Load(t)
	want := map[string]quirks{}
	for f, c := range set.Files {
		want[f] = quirks{conversations: c.Conversations, messages: c.Messages, toolCalls: c.ToolCalls, nullContent: c.NullContent,
			emptyContent: c.EmptyContent, nonASCII: c.NonASCII, cr: c.CR, backspace: c.Backspace, named: c.Named}
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(want)), transcripts.Files)

	base := time.Date(2025, 1, 2, 3, 4, 5, 600, time.UTC)
	total := quirks{}
	for _, file := range transcripts.Files {
		t.Run(file, func(t *testing.T) {
			path := set.Path(file)
			raws := rawLines(t, path)
			convs := loadConversations(t, path)
			require.Len(t, convs, len(raws))

			var got quirks
			for ci, conv := range convs {
				got.conversations++
				thread := transcripts.ThreadID(conv)
				evs, err := transcripts.Events(conv, "import", thread, "transcripts-test", base)
				require.NoError(t, err, "conversation %s", conv.ID)

				// Through the wire, and validated as a writer would before appending.
				var back []json.RawMessage
				for i, e := range evs {
					require.NoError(t, e.Validate(), "conversation %s event %d", conv.ID, i)
					b, err := events.Marshal(e)
					require.NoError(t, err)
					d, err := events.Unmarshal(b)
					require.NoError(t, err)
					require.Equal(t, e, d, "conversation %s event %d", conv.ID, i)

					var m events.Message
					if i == 0 {
						created, ok := d.Payload.(events.ThreadCreated)
						require.True(t, ok, "the first event creates the thread")
						assert.Equal(t, events.RepliesOff, created.Replies, "an imported thread is a record")
						assert.Equal(t, conv.ID, created.Metadata["source_id"])
						assert.JSONEq(t, string(raws[ci].Meta), created.Metadata["source_meta"], "the conversation's meta is kept as JSON text")
						if created.SystemPrompt == nil {
							continue
						}
						m = events.Message{Role: events.RoleSystem, Content: events.Text(*created.SystemPrompt)}
					} else {
						var ok bool
						m, ok = events.MessageOf(d.Payload)
						require.True(t, ok, "event %d of conversation %s is a message", i, conv.ID)
					}
					out, err := json.Marshal(events.ToOpenAIFlat(m))
					require.NoError(t, err)
					back = append(back, out)
				}

				src := raws[ci].Messages
				require.Len(t, back, len(src), "conversation %s: message count", conv.ID)
				for mi := range src {
					compareMessage(t, src[mi], back[mi], conv.ID, mi, &got)
					got.messages++
				}
			}
			assert.Equal(t, want[file], got)
			total.conversations += got.conversations
			total.messages += got.messages
		})
	}
	assert.Equal(t, set.Total().Conversations, total.conversations)
	assert.Equal(t, set.Total().Messages, total.messages)
}

// compareMessage checks that out (our OpenAI-format JSON of a message) has
// exactly the fields of src (the raw source message) with the same values,
// content byte for byte, and counts the quirks it sees.
func compareMessage(t *testing.T, src map[string]json.RawMessage, outJSON json.RawMessage, conv string, i int, q *quirks) {
	t.Helper()
	var out map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(outJSON, &out))
	where := func(field string) string { return conv + " message " + itoa(i) + " " + field }

	require.ElementsMatch(t, slices.Collect(maps.Keys(src)), slices.Collect(maps.Keys(out)),
		"%s: the same fields, `name` exactly when the source has it", where(""))
	assert.Equal(t, jsonString(t, src["role"]), jsonString(t, out["role"]), where("role"))

	// Content: null stays null, a string stays the same bytes.
	sc, oc := src["content"], out["content"]
	if string(sc) == "null" {
		assert.Equal(t, "null", string(oc), where("content"))
		q.nullContent++
	} else {
		s, o := jsonString(t, sc), jsonString(t, oc)
		if s != o {
			t.Fatalf("%s differs:\nsource %q\nback   %q", where("content"), s, o)
		}
		if s == "" {
			q.emptyContent++
		}
		if strings.ContainsFunc(s, func(r rune) bool { return r >= utf8.RuneSelf }) {
			q.nonASCII++
		}
		q.cr += strings.Count(s, "\r")
		q.backspace += strings.Count(s, "\b")
	}

	for _, f := range []string{"tool_call_id", "name"} {
		if raw, ok := src[f]; ok {
			assert.Equal(t, jsonString(t, raw), jsonString(t, out[f]), where(f))
		}
	}
	if _, ok := src["name"]; ok {
		q.named++
	}

	if raw, ok := src["tool_calls"]; ok {
		var sCalls, oCalls []map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &sCalls))
		require.NoError(t, json.Unmarshal(out["tool_calls"], &oCalls))
		require.Len(t, oCalls, len(sCalls), where("tool_calls"))
		for k := range sCalls {
			require.ElementsMatch(t, slices.Collect(maps.Keys(sCalls[k])), slices.Collect(maps.Keys(oCalls[k])), where("tool_calls keys"))
			for _, f := range []string{"id", "name", "arguments"} {
				s, o := jsonString(t, sCalls[k][f]), jsonString(t, oCalls[k][f])
				if s != o {
					t.Fatalf("%s[%d].%s differs:\nsource %q\nback   %q", where("tool_calls"), k, f, s, o)
				}
			}
			q.toolCalls++
		}
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// The second way in: each message on its own through events.FromOpenAI and
// Message.Payload (as the HTTP API converts what a client sends), compared
// with the source as read by events.OpenAIMessage.
func TestEveryTranscriptMessageRoundTripsThroughFromOpenAI(t *testing.T) {
	set2 := transcripts.Load(t)
	n := 0
	for _, file := range transcripts.Files {
		for _, conv := range loadConversations(t, set2.Path(file)) {
			for i, o := range conv.Messages {
				m, err := events.FromOpenAI(o)
				require.NoError(t, err)
				n++
				if m.Role == events.RoleSystem {
					assert.Nil(t, m.Payload(), "a system message has no event type; it goes to thread.created")
					assert.Equal(t, 0, i, "system messages only lead the transcripts")
					continue
				}
				e := envelope(m.Payload())
				require.NoError(t, e.Validate())
				b, err := events.Marshal(e)
				require.NoError(t, err)
				d, err := events.Unmarshal(b)
				require.NoError(t, err)
				back, ok := events.MessageOf(d.Payload)
				require.True(t, ok)
				require.Equal(t, m, back)

				want, err := json.Marshal(o)
				require.NoError(t, err)
				got, err := json.Marshal(events.ToOpenAIFlat(back))
				require.NoError(t, err)
				require.Equal(t, string(want), string(got), "%s message %d", conv.ID, i)
			}
		}
	}
	assert.Equal(t, set2.Total().Messages, n)
}
