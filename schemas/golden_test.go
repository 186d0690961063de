package schemas

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the Go events of goldenEvents")

const goldenDir = "testdata/golden"

// goldenFile is the layout of testdata/golden/<type>.json.
type goldenFile struct {
	// Description says what the vector shows.
	Description string `json:"description"`
	// JSON is the event's JSON form (indented in the file; raw JSON fields
	// are compacted before use, see README.md).
	JSON json.RawMessage `json:"json"`
	// MsgpackHex is the event's msgpack encoding, lower-case hex.
	MsgpackHex string `json:"msgpack_hex"`
}

func goldenPath(typ events.Type) string { return filepath.Join(goldenDir, string(typ)+".json") }

// writeGoldens writes the vector of every golden event (the -update flag).
func writeGoldens() error {
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		return err
	}
	for _, g := range goldenEvents() {
		j, err := g.Event.MarshalJSON()
		if err != nil {
			return err
		}
		b, err := events.Marshal(g.Event)
		if err != nil {
			return err
		}
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(goldenFile{Description: g.Note, JSON: j, MsgpackHex: hex.EncodeToString(b)}); err != nil {
			return err
		}
		if err := os.WriteFile(goldenPath(g.Event.Type), out.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readGolden reads the vector of typ and returns it with its JSON compacted
// (the form whose raw JSON fields reproduce the msgpack bytes) and its
// msgpack bytes.
func readGolden(t *testing.T, typ events.Type) (g goldenFile, compact []byte, mp []byte) {
	t.Helper()
	b, err := os.ReadFile(goldenPath(typ))
	require.NoError(t, err, "missing golden vector (run go test ./schemas/ -update)")
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&g))
	require.Regexp(t, regexp.MustCompile(`^([0-9a-f]{2})+$`), g.MsgpackHex, "msgpack_hex must be lower-case hex")
	mp, err = hex.DecodeString(g.MsgpackHex)
	require.NoError(t, err)
	var c bytes.Buffer
	require.NoError(t, json.Compact(&c, g.JSON))
	return g, c.Bytes(), mp
}

func TestGoldenDirectoryHoldsOneVectorPerEventType(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	require.NoError(t, err)
	var want []string
	for _, typ := range events.AllTypes {
		want = append(want, goldenPath(typ))
	}
	sort.Strings(want)
	sort.Strings(files)
	require.Equal(t, want, files)

	var types []events.Type
	for _, g := range goldenEvents() {
		types = append(types, g.Event.Type)
	}
	require.Equal(t, events.AllTypes, types, "goldenEvents has one event per type, in AllTypes order")
}

func TestGoldenVectorsValidateAgainstTheEnvelopeSchema(t *testing.T) {
	for _, typ := range events.AllTypes {
		t.Run(string(typ), func(t *testing.T) {
			g, compact, _ := readGolden(t, typ)
			require.NoError(t, validateJSON(t, g.JSON), "the file's JSON as written")
			require.NoError(t, validateJSON(t, compact), "the compacted JSON")
		})
	}
}

// The Go codec reproduces every vector: JSON -> Event -> msgpack gives the
// vector's bytes, and msgpack -> Event -> JSON gives the vector's JSON.
func TestGoCodecReproducesTheGoldenVectors(t *testing.T) {
	for _, typ := range events.AllTypes {
		t.Run(string(typ), func(t *testing.T) {
			g, compact, mp := readGolden(t, typ)

			var fromJSON events.Event
			require.NoError(t, fromJSON.UnmarshalJSON(compact))
			require.Equal(t, typ, fromJSON.Type)
			require.NoError(t, fromJSON.Validate())
			b, err := events.Marshal(fromJSON)
			require.NoError(t, err)
			require.Equal(t, g.MsgpackHex, hex.EncodeToString(b), "JSON -> Event -> msgpack")

			fromMsgpack, err := events.Unmarshal(mp)
			require.NoError(t, err)
			require.NoError(t, fromMsgpack.Validate())
			j, err := fromMsgpack.MarshalJSON()
			require.NoError(t, err)
			require.JSONEq(t, string(g.JSON), string(j), "msgpack -> Event -> JSON")
			b, err = events.Marshal(fromMsgpack)
			require.NoError(t, err)
			require.Equal(t, g.MsgpackHex, hex.EncodeToString(b), "msgpack -> Event -> msgpack")
		})
	}
}

// The files match the Go events they were generated from, so a change of
// the fixtures or of the encoder without -update fails here.
func TestGoldenVectorsAreUpToDate(t *testing.T) {
	for _, g := range goldenEvents() {
		t.Run(string(g.Event.Type), func(t *testing.T) {
			file, _, _ := readGolden(t, g.Event.Type)
			require.Equal(t, g.Note, file.Description)
			b, err := events.Marshal(g.Event)
			require.NoError(t, err)
			require.Equal(t, file.MsgpackHex, hex.EncodeToString(b), "msgpack (run go test ./schemas/ -update after a deliberate change)")
			j, err := g.Event.MarshalJSON()
			require.NoError(t, err)
			require.JSONEq(t, string(file.JSON), string(j), "JSON")
			for range 20 {
				again, err := events.Marshal(g.Event)
				require.NoError(t, err)
				require.Equal(t, b, again, "the encoding must be deterministic")
			}
		})
	}
}

// The vectors cover the shapes other encoders get wrong: multimodal parts,
// null content, raw JSON tool arguments, non-ASCII text and control bytes.
func TestGoldenVectorsCoverTheHardCases(t *testing.T) {
	var contents []events.Content
	var args []string
	for _, g := range goldenEvents() {
		switch p := g.Event.Payload.(type) {
		case events.UserMessage:
			contents = append(contents, p.Content)
		case events.AssistantMessage:
			contents = append(contents, p.Content)
			for _, c := range p.ToolCalls {
				args = append(args, c.Arguments)
			}
		case events.ToolResult:
			contents = append(contents, p.Content)
		}
	}
	has := func(f func(events.Content) bool) bool {
		for _, c := range contents {
			if f(c) {
				return true
			}
		}
		return false
	}
	hasPart := func(f func(events.Part) bool) bool {
		return has(func(c events.Content) bool {
			for _, p := range c.Parts {
				if f(p) {
					return true
				}
			}
			return false
		})
	}
	require.True(t, has(events.Content.IsNull), "null content")
	require.True(t, hasPart(func(p events.Part) bool { return p.Type == events.PartImage && p.URL != "" }), "image by URL")
	require.True(t, hasPart(func(p events.Part) bool { return p.Type == events.PartImage && p.Data != "" }), "base64 image")
	require.True(t, hasPart(func(p events.Part) bool { return p.Type == events.PartFile && p.FileID != "" }), "file reference")
	require.True(t, has(func(c events.Content) bool { return strings.Contains(c.Text, "\r") && strings.Contains(c.Text, "\b") }), "\\r and \\b")
	require.True(t, has(func(c events.Content) bool { return len(c.String()) != utf8.RuneCountInString(c.String()) }), "non-ASCII text")
	require.NotEmpty(t, args, "tool calls")
	for _, a := range args {
		var compact bytes.Buffer
		require.NoError(t, json.Compact(&compact, []byte(a)))
		if compact.String() != a {
			return // arguments with insignificant whitespace show they are kept verbatim
		}
	}
	t.Fatal("no tool call has arguments with whitespace that a re-encoder would drop")
}
