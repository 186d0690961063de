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
	inst, err := schemaInstance(t, payload)
	if err != nil {
		return "", "" // not JSON: the decoder reports it
	}
	return instanceProblem(t, inst)
}

// instanceProblem is payloadProblem of the payload schemaInstance decoded
// into inst.
func instanceProblem(t events.Type, inst any) (path, msg string) {
	all, err := payloadSchemas()
	if err != nil {
		return "", "" // the schemas package's tests keep the files compiling
	}
	s := all[t]
	if s == nil {
		return "", ""
	}
	return schemaProblem(s, inst)
}

// opaquePath is a node of a tree of instance locations: next maps a member
// name, or "*" for any member or array element, to the node below; skip
// marks a location whose value is not built.
type opaquePath struct {
	skip bool
	next map[string]*opaquePath
}

// child is the node at member (or element) k below o, nil when none.
func (o *opaquePath) child(k string) *opaquePath {
	if c, ok := o.next[k]; ok {
		return c
	}
	return o.next["*"]
}

// opaqueJSON holds, by event type, the locations of a payload whose schema
// is defs.json's raw_json (any JSON value, no constraint): the "json"
// member of the value objects of checkpoint events, which hold a
// framework's serialized state (LangGraph channel values, often tens of
// KB). The validator accepts whatever they hold, so schemaInstance checks
// them as JSON without building them. TestOpaqueJSONIsUnconstrained keeps
// this table true to schemas/.
var opaqueJSON = func() map[events.Type]*opaquePath {
	skip := &opaquePath{skip: true}
	value := &opaquePath{next: map[string]*opaquePath{"json": skip}}
	return map[events.Type]*opaquePath{
		events.TypeCheckpointSaved: {next: map[string]*opaquePath{
			"checkpoint": value,
			"metadata":   value,
			"channels":   {next: map[string]*opaquePath{"*": value}},
		}},
		events.TypeCheckpointWrites: {next: map[string]*opaquePath{
			"writes": {next: map[string]*opaquePath{"*": {next: map[string]*opaquePath{"value": value}}}},
		}},
	}
}()

// schemaInstance decodes payload into the value the validator walks, as
// jsonschema.UnmarshalJSON does (numbers as json.Number), except that a
// value at a location opaqueJSON[t] marks is scanned as JSON and left nil.
func schemaInstance(t events.Type, payload []byte) (any, error) {
	o := opaqueJSON[t]
	if o == nil {
		return jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	v, err := instanceValue(dec, o)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid character after top-level value")
	}
	return v, nil
}

// instanceValue reads the next value of dec at the location of o: decoded
// whole where o is nil, token by token along o's locations.
func instanceValue(dec *json.Decoder, o *opaquePath) (any, error) {
	if o == nil {
		var v any
		err := dec.Decode(&v)
		return v, err
	}
	if o.skip {
		return nil, dec.Decode(&skipJSON{})
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		m := map[string]any{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			name, _ := k.(string)
			if m[name], err = instanceValue(dec, o.child(name)); err != nil {
				return nil, err
			}
		}
		_, err := dec.Token()
		return m, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := instanceValue(dec, o.child("*"))
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return tok, nil
}

// skipJSON decodes a JSON value into nothing: the decoder checks it and
// hands over its bytes without copying them.
type skipJSON struct{}

func (skipJSON) UnmarshalJSON([]byte) error { return nil }

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
		// Of several unknown members, the first in sorted order: the
		// validator lists them in a map's order.
		return joinPath(path, slices.Min(ap.Properties)), "unknown field"
	}
	return path, best.ErrorKind.LocalizedString(schemaPrinter)
}

// schemaPrinter renders the validator's messages in English.
var schemaPrinter = message.NewPrinter(language.English)

// deepest returns the leaf cause of ve with the longest instance location;
// of equals, the one whose location sorts first, then whose schema keyword
// location does. The validator gathers an object's causes from a map, so
// their order differs from one call to the next: without the tie-break, a
// payload with several faults at one depth would be refused naming a
// different one each time.
func deepest(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	best := ve
	for _, c := range ve.Causes {
		if d := deepest(c); deeper(d, best) {
			best = d
		}
	}
	return best
}

// deeper reports whether cause a is the one to name before b (see
// deepest).
func deeper(a, b *jsonschema.ValidationError) bool {
	if la, lb := len(a.InstanceLocation), len(b.InstanceLocation); la != lb {
		return la > lb
	}
	if leafA, leafB := len(a.Causes) == 0, len(b.Causes) == 0; leafA != leafB {
		return leafA
	}
	if c := slices.Compare(a.InstanceLocation, b.InstanceLocation); c != 0 {
		return c < 0
	}
	if a.SchemaURL != b.SchemaURL {
		return a.SchemaURL < b.SchemaURL
	}
	return strings.Join(a.ErrorKind.KeywordPath(), "/") < strings.Join(b.ErrorKind.KeywordPath(), "/")
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
	if b == "" {
		return a
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

// unknownEnvelopeField returns the first of keys, the member names of an
// event object of a request in the order written, that
// schemas/envelope.json does not name ("" when none). The stream sequence
// and the store time are not members: the log assigns them.
func unknownEnvelopeField(keys []string) string {
	known, err := envelopeFields()
	if err != nil {
		return "" // the schemas package's tests keep the file valid
	}
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return k
		}
	}
	return ""
}

// eventMembers is what an append reads of an event object before it
// decodes the event.
type eventMembers struct {
	// keys are the member names in the order written.
	keys []string
	// typ is the last "type" member's value; typeOK is false when a
	// "type" member is not a string.
	typ    events.Type
	typeOK bool
	// payload is the last "payload" member's JSON text (a slice of the
	// event's bytes), nil when there is none; payloadAt is its offset in
	// the event object's text.
	payload   json.RawMessage
	payloadAt int
	// inst is the payload as schemaInstance(typ, payload) gives it, when
	// hasInst: read in the same pass when the object has one "type"
	// member, a string of a type with a schema, and one "payload" member
	// after it (as writers put them).
	inst    any
	hasInst bool
}

// readEventMembers reads the members of ev, an event object, in one pass
// of a json.Decoder, with the "type" and "payload" members a
// json.Unmarshal into struct{Type; Payload json.RawMessage} would give. It
// returns an error when ev is not a JSON object.
func readEventMembers(ev []byte) (eventMembers, error) {
	dec := json.NewDecoder(bytes.NewReader(ev))
	dec.UseNumber()
	return readMembers(dec, ev)
}

// readMembers is readEventMembers of the event object that is the next
// value of dec, whose input is src.
func readMembers(dec *json.Decoder, src []byte) (eventMembers, error) {
	m := eventMembers{typeOK: true}
	all, _ := payloadSchemas()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return eventMembers{}, errors.New("not a JSON object")
	}
	start := int(dec.InputOffset()) - 1 // the opening brace's
	types, payloads := 0, 0
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return eventMembers{}, err
		}
		name, _ := t.(string)
		m.keys = append(m.keys, name)
		switch name {
		case "type":
			types++
			// As a struct field would: a value that is not a string
			// leaves typ as it was, and so does null.
			if err := dec.Decode(&m.typ); err != nil {
				var ute *json.UnmarshalTypeError
				if !errors.As(err, &ute) {
					return eventMembers{}, err
				}
				m.typeOK = false
			}
		case "payload":
			payloads++
			from := dec.InputOffset()
			if types == 1 && payloads == 1 && m.typeOK && all[m.typ] != nil {
				m.inst, err = instanceValue(dec, opaqueJSON[m.typ])
				m.hasInst = true
			} else {
				err = dec.Decode(&skipJSON{})
			}
			if err != nil {
				return eventMembers{}, err
			}
			// The value's text runs from after the colon that follows
			// the name to where the decoder stopped.
			to := int(dec.InputOffset())
			text := src[from:to]
			if i := bytes.IndexByte(text, ':'); i >= 0 {
				text = text[i+1:]
			}
			m.payload = bytes.TrimSpace(text)
			m.payloadAt = to - len(bytes.TrimLeft(text, " \t\r\n")) - start
		default:
			if err := dec.Decode(&skipJSON{}); err != nil {
				return eventMembers{}, err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return eventMembers{}, err
	}
	// A later "type" or "payload" member makes the one read stale.
	m.hasInst = m.hasInst && types == 1 && payloads == 1
	return m, nil
}

// readAppendBody reads body, an append's body, in one pass when it is
// {"events": [...]} with event objects and nothing else: the text of each
// event (a slice of body) and its members. ok is false for any other
// body, which decodeBody then decodes (and reports the problems of).
func readAppendBody(body []byte) (raws []json.RawMessage, members []eventMembers, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for _, want := range []any{json.Delim('{'), "events", json.Delim('[')} {
		if t, err := dec.Token(); err != nil || t != want {
			return nil, nil, false
		}
	}
	for dec.More() {
		from := dec.InputOffset()
		m, err := readMembers(dec, body)
		if err != nil {
			return nil, nil, false
		}
		raws = append(raws, bytes.TrimLeft(body[from:dec.InputOffset()], " \t\r\n,"))
		members = append(members, m)
	}
	for _, want := range []any{json.Delim(']'), json.Delim('}')} {
		if t, err := dec.Token(); err != nil || t != want {
			return nil, nil, false
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, false
	}
	return raws, members, true
}

// decode decodes ev, the event object (one JSON value) m was read from,
// as json.Unmarshal into an events.Event does, reading the payload's text
// once (not also as a member of the envelope) when m holds one payload of
// one type. It returns false when that decode refuses the event, or m does
// not qualify: then json.Unmarshal says why.
func (m eventMembers) decode(ev []byte) (events.Event, bool) {
	p := bytes.TrimSpace(m.payload)
	if !m.hasInst || len(p) == 0 || bytes.Equal(p, []byte("null")) {
		return events.Event{}, false
	}
	// The envelope with an empty object for payload, which every
	// payload type decodes.
	at := len(ev) - len(bytes.TrimLeft(ev, " \t\r\n")) + m.payloadAt
	envelope := make([]byte, 0, len(ev)-len(m.payload)+2)
	envelope = append(append(append(envelope, ev[:at]...), "{}"...), ev[at+len(m.payload):]...)
	var e events.Event
	if json.Unmarshal(envelope, &e) != nil {
		return events.Event{}, false
	}
	payload, err := events.UnmarshalJSONPayload(e.Type, m.payload)
	if err != nil {
		return events.Event{}, false
	}
	e.Payload = payload
	return e, true
}

// payloadProblem is payloadProblem of m's type and payload.
func (m eventMembers) payloadProblem() (path, msg string) {
	if m.hasInst {
		return instanceProblem(m.typ, m.inst)
	}
	return payloadProblem(m.typ, m.payload)
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
