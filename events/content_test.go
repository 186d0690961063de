package events_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/events"
)

func TestContentJSONIsNullAStringOrAnArray(t *testing.T) {
	cases := []struct {
		name    string
		content events.Content
		json    string
	}{
		{"null content is JSON null", events.Content{}, `null`},
		{"empty text is an empty string", events.Text(""), `""`},
		{"text is not HTML-escaped", events.Text(`<a href="x">&</a>`), `"<a href=\"x\">&</a>"`},
		{"control bytes are escaped and come back", events.Text("\r\n\b\x00"), `"\r\n\b\u0000"`},
		{"no parts is an empty array", events.Parts(), `[]`},
		{"parts omit empty fields", events.Parts(events.Part{Type: events.PartText, Text: "hi"}, events.Part{Type: events.PartImage, URL: "https://x/y.png"}),
			`[{"type":"text","text":"hi"},{"type":"image","url":"https://x/y.png"}]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.content)
			require.NoError(t, err)
			assert.JSONEq(t, c.json, string(b))
			direct, err := c.content.MarshalJSON()
			require.NoError(t, err)
			assert.Equal(t, c.json, string(direct))

			var back events.Content
			require.NoError(t, json.Unmarshal([]byte(c.json), &back))
			assert.Equal(t, c.content, back)
			assert.True(t, back.Equal(c.content))
		})
	}
}

func TestContentMsgpackIsNilAStrOrAnArray(t *testing.T) {
	for _, c := range []struct {
		content events.Content
		first   byte
	}{
		{events.Content{}, 0xc0},
		{events.Text(""), 0xa0},
		{events.Text("x"), 0xa1},
		{events.Parts(), 0x90},
		{events.Parts(events.Part{Type: events.PartText, Text: "x"}), 0x91},
	} {
		b, err := msgpack.Marshal(c.content)
		require.NoError(t, err)
		assert.Equal(t, c.first, b[0], "%#v", c.content)
		var back events.Content
		require.NoError(t, msgpack.Unmarshal(b, &back))
		assert.Equal(t, c.content, back)
	}
}

func TestContentRejectsOtherShapes(t *testing.T) {
	for _, in := range []string{`42`, `true`, `{"type":"text"}`, `[1]`, `"unterminated`} {
		var c events.Content
		require.Error(t, c.UnmarshalJSON([]byte(in)), in)
	}
	for _, in := range [][]byte{{0x2a}, {0xc3}, {0x81, 0xa1, 'a', 0x01}, {0xdc, 0x04, 0x01}} {
		var c events.Content
		require.Error(t, msgpack.Unmarshal(in, &c), "%x", in)
	}
	// More than 1024 parts is refused before anything is allocated.
	var c events.Content
	err := msgpack.Unmarshal([]byte{0xdd, 0x00, 0x01, 0x00, 0x00}, &c)
	require.ErrorContains(t, err, "65536 parts (max 1024)")

	bad := events.Content{Kind: 9}
	_, err = bad.MarshalJSON()
	require.Error(t, err)
	_, err = msgpack.Marshal(bad)
	require.Error(t, err)
}

func TestContentHelpers(t *testing.T) {
	parts := events.Parts(
		events.Part{Type: events.PartText, Text: "one"},
		events.Part{Type: events.PartImage, URL: "https://x"},
		events.Part{Type: events.PartText, Text: "two"},
	)
	assert.Equal(t, "one\ntwo", parts.String())
	assert.Equal(t, "t", events.Text("t").String())
	assert.Equal(t, "", events.Content{}.String())

	assert.True(t, events.Content{}.IsNull())
	assert.False(t, events.Text("").IsNull())
	assert.False(t, events.Parts().IsNull())

	assert.False(t, events.Text("").Equal(events.Content{}), `"" is not null`)
	assert.False(t, events.Parts().Equal(events.Text("")))
	assert.True(t, events.Parts().Equal(events.Content{Kind: events.ContentParts, Parts: []events.Part{}}))
	assert.False(t, parts.Equal(events.Parts(parts.Parts[:2]...)))
	assert.True(t, parts.Equal(events.Parts(append([]events.Part{}, parts.Parts...)...)))

	assert.Equal(t, 5, events.Text("hello").Size())
	assert.Equal(t, 3+16+9+16+3+16, parts.Size())
}
