package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

func TestMain(m *testing.M) {
	// Run in a zone that is not UTC: decoded times (the envelope's and those
	// of messages inside thread.forked and thread.restored) must come back
	// in UTC whatever the machine's zone, or the vectors' JSON would differ
	// from machine to machine.
	time.Local = time.FixedZone("UTC+05:30", 5*3600+1800)
	flag.Parse()
	if *update {
		if err := writeGoldens(); err != nil {
			fmt.Fprintln(os.Stderr, "update golden vectors:", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// compiled is the envelope schema compiled once from FS, with format and
// content assertions on (date-time times, JSON tool-call arguments).
var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.AssertContent()
	// No loader: every reference must resolve to a file of FS.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	err := fs.WalkDir(FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := FS.ReadFile(p)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return err
		}
		return c.AddResource(BaseURL+p, doc)
	})
	if err != nil {
		return nil, err
	}
	return c.Compile(BaseURL + "envelope.json")
})

// envelopeSchema returns the compiled envelope schema.
func envelopeSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	sch, err := compiled()
	require.NoError(t, err, "compile the schemas")
	return sch
}

// validateJSON validates one JSON event against the envelope schema.
func validateJSON(t *testing.T, b []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err, "the instance is not JSON: %s", b)
	return envelopeSchema(t).Validate(inst)
}

// errorLocations returns the instance locations (JSON pointers) of every
// error in a schema validation error.
func errorLocations(err error) []string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	var locs []string
	for _, u := range ve.BasicOutput().Errors {
		locs = append(locs, u.InstanceLocation)
	}
	return locs
}

// readSchema reads one schema file of FS as a map of its top-level keys.
func readSchema(t *testing.T, name string) map[string]json.RawMessage {
	t.Helper()
	b, err := FS.ReadFile(name)
	require.NoError(t, err)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m), name)
	return m
}

// objectKeys returns the keys of a JSON object in document order.
func objectKeys(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok, "not an object: %s", raw)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}

func TestSchemasCompileAndCoverEveryEventType(t *testing.T) {
	envelopeSchema(t)

	var props map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(readSchema(t, "envelope.json")["properties"], &props))
	var typ struct {
		Enum []events.Type `json:"enum"`
	}
	require.NoError(t, json.Unmarshal(props["type"], &typ))
	require.Equal(t, events.AllTypes, typ.Enum, "envelope.json's type enum must list events.AllTypes in order")

	var allOf []struct {
		If struct {
			Properties struct {
				Type struct {
					Const events.Type `json:"const"`
				} `json:"type"`
			} `json:"properties"`
		} `json:"if"`
		Then struct {
			Properties struct {
				Payload struct {
					Ref string `json:"$ref"`
				} `json:"payload"`
			} `json:"properties"`
		} `json:"then"`
	}
	require.NoError(t, json.Unmarshal(readSchema(t, "envelope.json")["allOf"], &allOf))
	require.Len(t, allOf, len(events.AllTypes), "one if/then per event type")
	for i, typ := range events.AllTypes {
		require.Equal(t, typ, allOf[i].If.Properties.Type.Const)
		require.Equal(t, "payloads/"+string(typ)+".json", allOf[i].Then.Properties.Payload.Ref)
	}

	files, err := fs.Glob(FS, "payloads/*.json")
	require.NoError(t, err)
	var want []string
	for _, typ := range events.AllTypes {
		want = append(want, "payloads/"+string(typ)+".json")
	}
	sort.Strings(want)
	require.Equal(t, want, files, "exactly one payload schema per event type")

	for _, f := range append(files, "envelope.json", "defs.json") {
		s := readSchema(t, f)
		require.JSONEq(t, `"https://json-schema.org/draft/2020-12/schema"`, string(s["$schema"]), f)
		require.JSONEq(t, `"`+BaseURL+f+`"`, string(s["$id"]), f)
	}
}

// goField is what Go writes for one struct field.
type goField struct {
	name string
	omit bool // omitted when empty (omitempty or omitzero)
}

// goFields returns the fields of struct type typ as msgpack writes them, in
// order, and checks that the json tags name the same fields with the same
// omission rule (the JSON form and the msgpack form have the same shape).
func goFields(t *testing.T, typ reflect.Type) []goField {
	t.Helper()
	var out []goField
	for i := range typ.NumField() {
		f := typ.Field(i)
		mp := strings.Split(f.Tag.Get("msgpack"), ",")
		js := strings.Split(f.Tag.Get("json"), ",")
		require.NotEmpty(t, mp[0], "%s.%s has no msgpack name", typ, f.Name)
		require.Equal(t, mp[0], js[0], "%s.%s: msgpack and json names differ", typ, f.Name)
		mpOmit := slices.Contains(mp[1:], "omitempty")
		jsOmit := slices.Contains(js[1:], "omitempty") || slices.Contains(js[1:], "omitzero")
		require.Equal(t, mpOmit, jsOmit, "%s.%s: msgpack and json omit it differently", typ, f.Name)
		out = append(out, goField{mp[0], mpOmit})
	}
	return out
}

// schemaObject returns the property names (in order) and the required names
// of the object schema at name (a file of FS) and, when def is not empty,
// its $defs entry def.
func schemaObject(t *testing.T, name, def string) (props, required []string) {
	t.Helper()
	s := readSchema(t, name)
	if def != "" {
		var defs map[string]map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(s["$defs"], &defs))
		s = defs[def]
		require.NotNil(t, s, "%s has no $defs/%s", name, def)
	}
	require.JSONEq(t, `false`, string(s["additionalProperties"]), "%s %s must forbid other properties", name, def)
	if r, ok := s["required"]; ok {
		require.NoError(t, json.Unmarshal(r, &required))
	}
	return objectKeys(t, s["properties"]), required
}

// The schemas name exactly the Go fields, in Go's (msgpack key) order, and
// require exactly the fields Go always writes.
func TestSchemasNameTheGoFieldsInOrder(t *testing.T) {
	cases := []struct {
		schema, def string
		typ         reflect.Type
	}{
		{"defs.json", "part", reflect.TypeFor[events.Part]()},
		{"defs.json", "tool_call", reflect.TypeFor[events.ToolCall]()},
		{"defs.json", "usage", reflect.TypeFor[events.Usage]()},
		{"defs.json", "message", reflect.TypeFor[events.Message]()},
	}
	for _, g := range goldenEvents() {
		cases = append(cases, struct {
			schema, def string
			typ         reflect.Type
		}{"payloads/" + string(g.Event.Type) + ".json", "", reflect.TypeOf(g.Event.Payload)})
	}
	for _, c := range cases {
		t.Run(path.Join(c.schema, c.def), func(t *testing.T) {
			props, required := schemaObject(t, c.schema, c.def)
			var names, always []string
			for _, f := range goFields(t, c.typ) {
				names = append(names, f.name)
				if !f.omit {
					always = append(always, f.name)
				}
			}
			require.Equal(t, names, props, "properties must be the Go fields of %s in order", c.typ)
			sort.Strings(always)
			sort.Strings(required)
			require.Equal(t, always, required, "required must be the fields %s always writes", c.typ)
		})
	}
}

// The envelope schema lists the keys in the order Go writes them, both in
// msgpack and in JSON.
func TestEnvelopeSchemaListsTheKeysInWireOrder(t *testing.T) {
	e := goldenEvents()[3].Event // has causation and correlation ids
	require.NotEmpty(t, e.CausationID)
	require.NotEmpty(t, e.CorrelationID)
	props, required := schemaObject(t, "envelope.json", "")

	b, err := events.Marshal(e)
	require.NoError(t, err)
	require.Equal(t, props, msgpackKeys(t, b), "msgpack key order")

	j, err := e.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, props, objectKeys(t, j), "JSON key order")

	e.CausationID, e.CorrelationID = "", ""
	b, err = events.Marshal(e)
	require.NoError(t, err)
	require.Equal(t, required, msgpackKeys(t, b), "without the optional ids, exactly the required keys in order")
}

func TestEveryGoEventTypeEncodesToSchemaValidJSON(t *testing.T) {
	seen := map[events.Type]bool{}
	for _, c := range validEvents() {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.event.Validate(), "the fixture must be valid for Go too")
			j, err := c.event.MarshalJSON()
			require.NoError(t, err)
			require.NoError(t, validateJSON(t, j), "%s", j)
			seen[c.event.Type] = true
		})
	}
	for _, typ := range events.AllTypes {
		require.True(t, seen[typ], "no valid fixture of type %s", typ)
	}
}
