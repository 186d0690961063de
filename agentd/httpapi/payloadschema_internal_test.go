package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

// anyJSON are values of every JSON kind, some shaped like the fields
// around them.
var anyJSON = []any{nil, true, json.Number("-1"), "", "x", []any{}, []any{map[string]any{"type": json.Number("1")}},
	map[string]any{}, map[string]any{"type": json.Number("1"), "json": "x", "size": json.Number("-1"), "extra": []any{nil}}}

// TestOpaqueJSONIsUnconstrained walks each location opaqueJSON skips down
// the compiled payload schema: the location's schema is defs.json's
// raw_json, which takes a value of every kind, and no schema on the way
// there looks into its members' values from above (if/then, allOf,
// contains, ...), so leaving the value out of the instance changes no
// verdict.
func TestOpaqueJSONIsUnconstrained(t *testing.T) {
	all, err := payloadSchemas()
	require.NoError(t, err)
	for typ, o := range opaqueJSON {
		s := all[typ]
		require.NotNil(t, s, typ)
		walkOpaque(t, string(typ), s, o)
	}
}

func walkOpaque(t *testing.T, at string, s *jsonschema.Schema, o *opaquePath) {
	t.Helper()
	if o.skip {
		require.NotNil(t, s.Ref, at)
		require.True(t, strings.HasSuffix(s.Ref.Location, "defs.json#/$defs/raw_json"), "%s is %s", at, s.Ref.Location)
		for _, v := range anyJSON {
			require.NoError(t, s.Validate(v), "%s: %v", at, v)
		}
		return
	}
	for s.Ref != nil && s.Properties == nil && s.AdditionalProperties == nil && s.Items2020 == nil {
		s = s.Ref
	}
	require.True(t, s.If == nil && s.Then == nil && s.Else == nil && s.Not == nil && s.AllOf == nil && s.AnyOf == nil &&
		s.OneOf == nil && s.DependentSchemas == nil && s.Dependencies == nil && s.UnevaluatedProperties == nil &&
		s.UnevaluatedItems == nil && s.Contains == nil && s.PatternProperties == nil && s.Ref == nil, "%s looks into its values", at)
	for k, c := range o.next {
		var sub *jsonschema.Schema
		switch {
		case k != "*":
			sub = s.Properties[k]
		case s.Items2020 != nil:
			sub = s.Items2020
		default:
			sub, _ = s.AdditionalProperties.(*jsonschema.Schema)
		}
		require.NotNil(t, sub, "%s.%s has no schema", at, k)
		walkOpaque(t, at+"."+k, sub, c)
	}
}

// FuzzSchemaInstance checks that a checkpoint payload's problems are the
// same from the instance schemaInstance builds as from the whole decoded
// payload: all of them, as the validator's causes of one payload come in
// an order that varies between runs.
func FuzzSchemaInstance(f *testing.F) {
	for _, p := range []string{
		`{"id": "c1", "checkpoint": {"type": "json", "json": {"a": [1, 2.5e3, null]}}}`,
		`{"id": "c1", "checkpoint": {"type": "json", "json": {"type": 1}}, "metadata": {"type": "json", "json": 5}, "channels": {"m": {"type": "json", "json": [{"x": 1}]}, "": {"type": "json"}}}`,
		`{"id": "c1", "checkpoint": "x", "channels": {"m": {"json": 1}}}`,
		`{"id": "c1", "checkpoint": {"type": 1, "json": 1, "size": -1}, "extra": {}}`,
		`{"id": "", "checkpoint": {"type": "json", "json": {}}, "messages": [{"role": "tool", "content": "x"}]}`,
		`{"checkpoint": "c1", "task": "t", "writes": [{"idx": 0, "channel": "a", "value": {"type": "json", "json": {"idx": "x"}}}, {"idx": "0"}]}`,
		`{"checkpoint": "c1", "task": "t", "writes": [{"idx": 0, "channel": "a", "value": [1]}, 5]}`,
		`{"checkpoint": "c1", "task": "t", "writes": {"a": {"value": {"json": 1}}}}`,
		`[{"checkpoint": {"json": 1}}]`,
		`"x"`,
	} {
		f.Add(p)
	}
	all, err := payloadSchemas()
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, payload string) {
		if !json.Valid([]byte(payload)) {
			return
		}
		want, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(payload)))
		require.NoError(t, err)
		for _, typ := range []events.Type{events.TypeCheckpointSaved, events.TypeCheckpointWrites} {
			got, err := schemaInstance(typ, []byte(payload))
			require.NoError(t, err)
			require.Equal(t, schemaLeaves(all[typ], want), schemaLeaves(all[typ], got), "%s %s", typ, payload)
		}
	})
}

// schemaLeaves are the problems of inst under s: each leaf cause's field
// path and message (the names of additional properties sorted), sorted.
func schemaLeaves(s *jsonschema.Schema, inst any) []string {
	var ve *jsonschema.ValidationError
	if !errors.As(s.Validate(inst), &ve) {
		return nil
	}
	var out []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			msg := e.ErrorKind.LocalizedString(schemaPrinter)
			if ap, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
				msg = "additional properties " + strings.Join(slices.Sorted(slices.Values(ap.Properties)), ", ")
			}
			out = append(out, fieldPath(e.InstanceLocation)+": "+msg)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.Sort(out)
	return out
}

// FuzzEventMembersDecode checks that an event object decoded from its
// members is the event json.Unmarshal gives, whenever the members decode
// it.
func FuzzEventMembersDecode(f *testing.F) {
	for _, ev := range []string{
		`{"type": "message.user", "payload": {"content": "hello"}}`,
		`{"id": "0197a2b4-0000-7000-8000-000000000001", "type": "message.assistant", "tenant": "acme", "thread": "t1", "time": "2026-11-29T01:00:00.5+01:00", "producer": "p", "causation_id": "c", "correlation_id": "r", "v": 1, "payload": {"content": [{"type": "text", "text": "hi"}], "tool_calls": [{"id": "1", "name": "f", "arguments": {"a": 1}}]}}`,
		`{"type":"checkpoint.saved","payload":{"id":"c1","checkpoint":{"type":"json","json":{"v":4}},"channels":{"messages":{"type":"json","json":[{"lc":1}]}}},"id":"0197a2b4-0000-7000-8000-000000000002"}`,
		`{"payload": {"checkpoint": "c1", "task": "t", "writes": [{"idx": 0, "channel": "a", "value": {"type": "json", "json": 1}}]}, "type": "checkpoint.writes"}`,
		`{"type": "message.user", "payload" : null}`,
		" \n {\"type\": \"message.user\", \"payload\":\t{\"content\": \"x\"} } ",
		`{"type": "message.user", "payload": {"content": 5}}`,
		`{"type": "state.set", "v": 99, "payload": {}}`,
	} {
		f.Add(ev)
	}
	f.Fuzz(func(t *testing.T, ev string) {
		if !json.Valid([]byte(ev)) {
			return
		}
		m, err := readEventMembers([]byte(ev))
		if err != nil {
			return
		}
		got, ok := m.decode([]byte(ev))
		if !ok {
			return
		}
		var want events.Event
		require.NoError(t, json.Unmarshal([]byte(ev), &want), ev)
		require.Equal(t, want, got, ev)
	})
}
