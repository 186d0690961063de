package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/convlog/convlog/agentd/httpapi"
)

// openAPIURL is the document's id for the validator (never fetched).
const openAPIURL = "mem:///openapi.json"

// conformance checks real responses against openapi.json: every answer the
// tests' requests get (env.do) must be a status the operation documents,
// with a JSON body valid against the documented schema. It is built once.
var conformance = sync.OnceValues(func() (*openAPIConformance, error) {
	raw := httpapi.OpenAPI()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(openAPIURL, doc); err != nil {
		return nil, err
	}
	var d struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, err
	}
	oc := &openAPIConformance{compiler: c, responses: d.Components.Responses, schemas: map[string]*jsonschema.Schema{}}
	for path, ops := range d.Paths {
		re := regexp.MustCompile("^" + regexp.MustCompile(`\\\{[^/]+\\\}`).ReplaceAllString(regexp.QuoteMeta(path), "[^/]+") + "$")
		for method, op := range ops {
			var o struct {
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if json.Unmarshal(op, &o) != nil || o.Responses == nil {
				continue
			}
			oc.ops = append(oc.ops, openAPIOp{method: strings.ToUpper(method), path: path, re: re, responses: o.Responses})
		}
	}
	return oc, nil
})

type openAPIConformance struct {
	mu        sync.Mutex
	compiler  *jsonschema.Compiler
	responses map[string]json.RawMessage
	schemas   map[string]*jsonschema.Schema
	ops       []openAPIOp
}

type openAPIOp struct {
	method, path string
	re           *regexp.Regexp
	responses    map[string]json.RawMessage
}

// pointerEscape escapes a JSON pointer token.
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// check returns why (method, path) answering status with body of media
// type ct does not conform, or "".
func (oc *openAPIConformance) check(method, path string, status int, ct string, body []byte) string {
	path, _, _ = strings.Cut(path, "?")
	var op *openAPIOp
	for i := range oc.ops {
		if oc.ops[i].method == method && oc.ops[i].re.MatchString(path) && (op == nil || len(oc.ops[i].path) > len(op.path)) {
			op = &oc.ops[i]
		}
	}
	if op == nil {
		return "" // not a documented route (TestOpenAPIDocumentsEveryRoute checks the route set)
	}
	code := strconv.Itoa(status)
	resp, ok := op.responses[code]
	ptr := "#/paths/" + pointerEscape(op.path) + "/" + strings.ToLower(method) + "/responses/" + code
	if !ok {
		if resp, ok = op.responses[code[:1]+"XX"]; ok {
			ptr = ptr[:len(ptr)-3] + code[:1] + "XX"
		} else if resp, ok = op.responses["default"]; ok {
			ptr = ptr[:len(ptr)-3] + "default"
		}
	}
	if !ok {
		return fmt.Sprintf("%s %s answered %d, which openapi.json does not document for %s %s", method, path, status, method, op.path)
	}
	var ref struct {
		Ref string `json:"$ref"`
	}
	if json.Unmarshal(resp, &ref) == nil && strings.HasPrefix(ref.Ref, "#/components/responses/") {
		name := strings.TrimPrefix(ref.Ref, "#/components/responses/")
		resp, ptr = oc.responses[name], ref.Ref
	}
	var r struct {
		Content map[string]json.RawMessage `json:"content"`
	}
	if json.Unmarshal(resp, &r) != nil || len(r.Content) == 0 || len(body) == 0 {
		return ""
	}
	mt, _, _ := mime.ParseMediaType(ct)
	media, ok := r.Content[mt]
	if !ok {
		return fmt.Sprintf("%s %s answered %d as %s; openapi.json documents %v", method, path, status, mt, keys(r.Content))
	}
	if mt != "application/json" && mt != "application/problem+json" {
		return ""
	}
	var m struct {
		Schema json.RawMessage `json:"schema"`
	}
	if json.Unmarshal(media, &m) != nil || m.Schema == nil {
		return ""
	}
	loc := openAPIURL + ptr + "/content/" + pointerEscape(mt) + "/schema"
	oc.mu.Lock()
	s, ok := oc.schemas[loc]
	if !ok {
		var err error
		if s, err = oc.compiler.Compile(loc); err != nil {
			oc.mu.Unlock()
			return fmt.Sprintf("compile %s: %v", loc, err)
		}
		oc.schemas[loc] = s
	}
	oc.mu.Unlock()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Sprintf("%s %s answered %d with a body that is not JSON: %v", method, path, status, err)
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Sprintf("%s %s answered %d with a body openapi.json's schema refuses: %v\nbody: %.500s", method, path, status, err, body)
	}
	return ""
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkConformance fails t when the answer does not conform.
func checkConformance(t testing.TB, method, path string, r resp) {
	t.Helper()
	oc, err := conformance()
	if err != nil {
		t.Errorf("openapi.json: %v", err)
		return
	}
	if why := oc.check(method, path, r.status, r.header.Get("Content-Type"), r.body); why != "" {
		t.Errorf("openapi conformance: %s", why)
	}
}

// The conformance check refuses what openapi.json does not allow: an
// undocumented status, and a body its schema refuses.
func TestConformanceCheckCanFail(t *testing.T) {
	oc, err := conformance()
	if err != nil {
		t.Fatal(err)
	}
	if why := oc.check("GET", "/v1/threads/abc", 418, "application/json", []byte(`{}`)); !strings.Contains(why, "does not document") {
		t.Errorf("an undocumented status passed: %q", why)
	}
	if why := oc.check("GET", "/v1/threads/abc", 200, "application/json", []byte(`{"version":"not a number"}`)); !strings.Contains(why, "schema refuses") {
		t.Errorf("a body the schema refuses passed: %q", why)
	}
	if why := oc.check("GET", "/v1/threads/abc", 404, "application/problem+json", []byte(`{"type":"urn:convlog:problem:not-found","title":"Not found","status":404}`)); why != "" {
		t.Errorf("a documented problem was refused: %s", why)
	}
}
