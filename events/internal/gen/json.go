package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/convlog/convlog/events"
)

// envelopeJSON replaces the "type" enum and the payload selection of
// schemas/envelope.json with the registry's types.
func envelopeJSON(doc []byte) ([]byte, error) {
	reg := events.Registry()
	types := make([]events.Type, len(reg))
	type ifType struct {
		Properties struct {
			Type struct {
				Const events.Type `json:"const"`
			} `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	type thenPayload struct {
		Properties struct {
			Payload struct {
				Ref string `json:"$ref"`
			} `json:"payload"`
		} `json:"properties"`
	}
	type selection struct {
		If   ifType      `json:"if"`
		Then thenPayload `json:"then"`
	}
	sels := make([]selection, len(reg))
	for i, ti := range reg {
		types[i] = ti.Type
		s := &sels[i]
		s.If.Properties.Type.Const = ti.Type
		s.If.Required = []string{"type"}
		s.Then.Properties.Payload.Ref = "payloads/" + string(ti.Type) + ".json"
	}
	doc, err := replaceValue(doc, types, "properties", "type", "enum")
	if err != nil {
		return nil, err
	}
	return replaceValue(doc, sels, "allOf")
}

// openAPIJSON replaces the enum of the Event schema's "type" in
// agentd/httpapi/openapi.json with the registry's types that are InAPI.
func openAPIJSON(doc []byte) ([]byte, error) {
	var types []events.Type
	for _, ti := range events.Registry() {
		if ti.InAPI {
			types = append(types, ti.Type)
		}
	}
	return replaceValue(doc, types, "components", "schemas", "Event", "properties", "type", "enum")
}

// replaceValue replaces the value at path (object keys from the top) in
// doc by v, indented as json.MarshalIndent does with two spaces, starting
// at the indentation of the line the value starts on.
func replaceValue(doc []byte, v any, path ...string) ([]byte, error) {
	start, end, err := valueSpan(doc, path...)
	if err != nil {
		return nil, err
	}
	line := bytes.LastIndexByte(doc[:start], '\n') + 1
	indent := doc[line : line+len(doc[line:start])-len(bytes.TrimLeft(doc[line:start], " \t"))]
	b, err := json.MarshalIndent(v, string(indent), "  ")
	if err != nil {
		return nil, err
	}
	return append(append(append([]byte(nil), doc[:start]...), b...), doc[end:]...), nil
}

// valueSpan returns the byte offsets of the value at path in doc.
func valueSpan(doc []byte, path ...string) (start, end int, err error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	for depth, key := range path {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return 0, 0, fmt.Errorf("%s is not an object", strings.Join(path[:depth], "."))
		}
		for {
			tok, err := dec.Token()
			if err != nil {
				return 0, 0, err
			}
			k, ok := tok.(string)
			if !ok {
				return 0, 0, fmt.Errorf("%s has no member %q", strings.Join(path[:depth], "."), key)
			}
			if k == key {
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return 0, 0, err
			}
		}
	}
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return 0, 0, err
	}
	end = int(dec.InputOffset())
	start = end - len(raw)
	if !bytes.Equal(doc[start:end], raw) {
		return 0, 0, fmt.Errorf("cannot locate %s", strings.Join(path, "."))
	}
	return start, end, nil
}

// objectKeys returns the member names of the object at path in doc, in
// document order.
func objectKeys(doc []byte, path ...string) ([]string, error) {
	start, end, err := valueSpan(doc, path...)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(doc[start:end]))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%s is not an object", strings.Join(path, "."))
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}
