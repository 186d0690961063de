package httpapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
)

// jsonFields are the JSON member names of struct type t as encoding/json
// writes them (embedded structs flattened, "-" left out).
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			out = append(out, jsonFields(ft)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The response types the handlers render and the schemas of openapi.json
// name the same members: a field added to a Go response type (or to the
// client's read model it copies) without the document, or a property the
// document promises that no type writes, fails here. (The conformance
// check validates real responses; this catches what no test's response
// happens to carry.)
func TestResponseTypesMatchTheDocument(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(OpenAPI(), &doc))
	cases := []struct {
		schema string
		typ    any
	}{
		{"Thread", threadBody{}},
		{"ThreadSummary", client.ThreadSummary{}},
		{"AppendResponse", appendResponse{}},
		{"LifecycleResponse", lifecycleResponse{}},
		{"ErasureReport", eraseResponse{}},
		{"ConvlogInfo", convlogInfo{}},
		{"ChatCompletion", chatCompletion{}},
		{"ChatCompletionChunk", chatChunk{}},
		{"Problem", Problem{}},
		{"StateResponse", stateBody{}},
		{"StateKeyResponse", stateKeyBody{}},
	}
	for _, c := range cases {
		t.Run(c.schema, func(t *testing.T) {
			s, ok := doc.Components.Schemas[c.schema]
			require.True(t, ok, "openapi.json has no schema %s", c.schema)
			var props []string
			for p := range s.Properties {
				props = append(props, p)
			}
			slices.Sort(props)
			require.Equal(t, props, jsonFields(reflect.TypeOf(c.typ)),
				"members of %T (right) against the properties of schema %s (left)", c.typ, c.schema)
		})
	}
}
