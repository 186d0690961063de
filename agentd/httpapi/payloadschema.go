package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/schemas"
)

// payloadSchemas compiles the JSON Schema of every event payload from
// schemas.FS (the wire contract non-Go producers follow) once.
var payloadSchemas = sync.OnceValues(func() (map[events.Type]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	err := fs.WalkDir(schemas.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(schemas.FS, path)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("schema %s: %w", path, err)
		}
		return c.AddResource(schemas.BaseURL+path, doc)
	})
	if err != nil {
		return nil, err
	}
	out := map[events.Type]*jsonschema.Schema{}
	for _, t := range events.AllTypes {
		s, err := c.Compile(schemas.BaseURL + "payloads/" + string(t) + ".json")
		if err != nil {
			return nil, fmt.Errorf("schema of %s: %w", t, err)
		}
		out[t] = s
	}
	return out, nil
})

// payloadProblem checks payload, the JSON of an event payload of type t,
// against its schema in schemas/: strict (a field the schema does not
// name is refused at any depth) and exact (the path of the first problem,
// e.g. "content[0].text", and a message without Go type names). It
// returns "", "" when payload is valid or t has no schema (the event
// decoder reports an unknown type).
func payloadProblem(t events.Type, payload json.RawMessage) (path, msg string) {
	all, err := payloadSchemas()
	if err != nil {
		return "", "" // the schemas package's tests keep the files compiling
	}
	s := all[t]
	if s == nil {
		return "", ""
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return "", "" // not JSON: the decoder reports it
	}
	return schemaProblem(s, inst)
}

// schemaProblem validates inst against s and returns the most specific
// problem: its location as a field path and its message.
func schemaProblem(s *jsonschema.Schema, inst any) (path, msg string) {
	err := s.Validate(inst)
	var ve *jsonschema.ValidationError
	if err == nil || !errors.As(err, &ve) {
		return "", ""
	}
	best := deepest(ve)
	if t, ok := best.ErrorKind.(*kind.Type); ok && t.Got == "null" {
		// A missing value: events.Validate names what is required
		// (422 invalid-event), as it does for an absent field.
		return "", ""
	}
	path = fieldPath(best.InstanceLocation)
	if ap, ok := best.ErrorKind.(*kind.AdditionalProperties); ok && len(ap.Properties) > 0 {
		return joinPath(path, ap.Properties[0]), "unknown field"
	}
	return path, best.ErrorKind.LocalizedString(schemaPrinter)
}

// schemaPrinter renders the validator's messages in English.
var schemaPrinter = message.NewPrinter(language.English)

// deepest returns the leaf cause of ve with the longest instance location
// (the first of equals).
func deepest(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	best := ve
	for _, c := range ve.Causes {
		if d := deepest(c); len(d.InstanceLocation) > len(best.InstanceLocation) || len(best.Causes) > 0 && len(d.Causes) == 0 && len(d.InstanceLocation) == len(best.InstanceLocation) {
			best = d
		}
	}
	return best
}

// fieldPath renders a JSON pointer's tokens as a field path:
// ["content","0","text"] is "content[0].text".
func fieldPath(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		if _, err := strconv.Atoi(t); err == nil {
			b.WriteString("[" + t + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(t)
	}
	return b.String()
}

func joinPath(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// createBodyProblem checks the body of a thread create, which is a
// thread.created payload plus "id", against that payload's schema, so that
// its errors name the exact field ("metadata.a") as for events. It reads
// the body (and puts it back); nil when the body is not declared as JSON
// or is not a JSON object (decodeJSON reports those) or is valid.
func createBodyProblem(r *http.Request) *Problem {
	if r.Body == nil || !declaresJSON(r) {
		return nil
	}
	b, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return nil // the decoder meets the same error
	}
	var body map[string]json.RawMessage
	if json.Unmarshal(b, &body) != nil {
		return nil
	}
	delete(body, "id")
	payload, err := json.Marshal(body)
	if err != nil {
		return nil
	}
	if path, msg := payloadProblem(events.TypeThreadCreated, payload); msg != "" {
		return invalid(path, orBody(path)+": "+msg)
	}
	return nil
}

// envelopeFields are the members of an event's JSON form, in order: the
// properties of schemas/envelope.json.
var envelopeFields = sync.OnceValues(func() ([]string, error) {
	b, err := fs.ReadFile(schemas.FS, "envelope.json")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Properties json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	return objectKeys(doc.Properties)
})

// unknownEnvelopeField returns the first member of ev, an event object of
// a request, that schemas/envelope.json does not name ("" when none, or
// when ev is not a JSON object: the event decoder reports that). The
// stream sequence and the store time are not members: the log assigns
// them.
func unknownEnvelopeField(ev json.RawMessage) string {
	known, err := envelopeFields()
	if err != nil {
		return "" // the schemas package's tests keep the file valid
	}
	keys, err := objectKeys(ev)
	if err != nil {
		return ""
	}
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return k
		}
	}
	return ""
}

// objectKeys returns the member names of the JSON object b in the order
// they are written.
func objectKeys(b []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
	}
	return keys, nil
}
