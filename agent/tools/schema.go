package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const emptyObjectSchema = `{"type":"object","properties":{}}`

// compileSchema compiles a tool's parameters schema (draft 2020-12).
func compileSchema(params json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return nil, fmt.Errorf("parameters are not JSON: %w", err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("parameters must be a JSON Schema object")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const url = "mem:///parameters.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("parameters do not compile: %w", err)
	}
	return s, nil
}

// noLoader refuses every external schema: tool schemas are self-contained.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %s: tool schemas must be self-contained", url)
}

// validateArgs parses args and checks them against s; the error text says
// every problem with its location.
func validateArgs(s *jsonschema.Schema, args []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	err = s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	// The first line names the schema URL; the others are the problems.
	lines := strings.Split(ve.Error(), "\n")
	var probs []string
	for _, l := range lines[1:] {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))
		l = strings.Replace(l, "at '':", "at the top level:", 1)
		if l != "" {
			probs = append(probs, l)
		}
	}
	if len(probs) == 0 {
		return errors.New(lines[0])
	}
	return errors.New(strings.Join(probs, "; "))
}
