package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
)

type openAPIDoc struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

type operation struct {
	OperationID string            `json:"operationId"`
	Security    *[]map[string]any `json:"security"`
	Responses   map[string]any    `json:"responses"`
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// The document lists exactly the routes the server registers, each with an
// operation id, responses, and security that matches whether it is public.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	e := newEnv(t)
	var doc openAPIDoc
	require.NoError(t, json.Unmarshal(httpapi.OpenAPI(), &doc))

	documented := map[string]operation{}
	for path, item := range doc.Paths {
		for key, raw := range item {
			if !slices.Contains(httpMethods, key) {
				continue
			}
			var op operation
			require.NoError(t, json.Unmarshal(raw, &op))
			documented[strings.ToUpper(key)+" "+path] = op
		}
	}
	registered := map[string]httpapi.Route{}
	for _, rt := range e.api.Routes() {
		registered[rt.Method+" "+rt.Path] = rt
	}
	for k, rt := range registered {
		op, ok := documented[k]
		require.True(t, ok, "route %s is not in openapi.json", k)
		require.NotEmpty(t, op.OperationID, k)
		require.NotEmpty(t, op.Responses, k)
		if rt.Method != http.MethodGet && rt.Method != http.MethodHead {
			// A write can find the event store gone (503), slow (504)
			// or full (507): every write route says so.
			for _, status := range []string{"503", "504", "507"} {
				require.Contains(t, op.Responses, status, "%s is a write: it must document %s", k, status)
			}
		}
		if rt.Public {
			require.NotNil(t, op.Security, "%s is public: it must say security: []", k)
			require.Empty(t, *op.Security, k)
		} else {
			require.Nil(t, op.Security, "%s needs the document's bearer security", k)
		}
	}
	for k := range documented {
		_, ok := registered[k]
		require.True(t, ok, "openapi.json documents %s, which the server does not register", k)
	}
	ids := map[string]bool{}
	for k, op := range documented {
		require.False(t, ids[op.OperationID], "operationId %s of %s is used twice", op.OperationID, k)
		ids[op.OperationID] = true
	}

	// It is served as is.
	r := e.do("GET", "/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.Equal(t, httpapi.OpenAPI(), r.body)
}

// The document is OpenAPI 3.1: valid against the OpenAPI Initiative's
// schema for 3.1 documents, and every internal $ref resolves.
func TestOpenAPIDocumentIsValidOpenAPI31(t *testing.T) {
	b := httpapi.OpenAPI()
	require.True(t, json.Valid(b))
	var doc openAPIDoc
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Regexp(t, regexp.MustCompile(`^3\.1\.\d+$`), doc.OpenAPI)

	const schemaID = "https://spec.openapis.org/oas/3.1/schema/2022-10-07"
	sb, err := os.ReadFile("testdata/oas-3.1-schema-2022-10-07.json")
	require.NoError(t, err)
	schemaDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(sb))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource(schemaID, schemaDoc))
	sch, err := c.Compile(schemaID)
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	require.NoError(t, sch.Validate(inst))

	// Every "$ref": "#/..." points at something.
	var root any
	require.NoError(t, json.Unmarshal(b, &root))
	var refs []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if s, ok := c.(string); ok && k == "$ref" {
					refs = append(refs, s)
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(root)
	require.NotEmpty(t, refs)
	for _, ref := range refs {
		require.True(t, strings.HasPrefix(ref, "#/"), "external ref %s", ref)
		node := root
		for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			m, ok := node.(map[string]any)
			require.True(t, ok, "ref %s", ref)
			node, ok = m[strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")]
			require.True(t, ok, "ref %s does not resolve", ref)
		}
	}

	// An invalid document is caught (the check can fail).
	bad := bytes.Replace(b, []byte(`"openapi": "3.1.0"`), []byte(`"openapi": "3.0.3"`), 1)
	inst, err = jsonschema.UnmarshalJSON(bytes.NewReader(bad))
	require.NoError(t, err)
	require.Error(t, sch.Validate(inst))
}
