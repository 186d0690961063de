package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Names of the built-in tools. The offline model (agent/model) calls them
// by these names.
const (
	ClockName      = "clock"
	CalculatorName = "calculator"
	KVGetName      = "kv_get"
	KVSetName      = "kv_set"
)

// Builtins returns the demo tools: [Clock] (with now, nil = time.Now),
// [Calculator], [KVGet] and [KVSet].
func Builtins(now func() time.Time) []Tool {
	return []Tool{Clock(now), Calculator(), KVGet(), KVSet()}
}

// Clock returns the "clock" tool: no arguments, the result is the current
// UTC time in RFC 3339 (e.g. "2026-01-02T03:04:05Z"). now is the time
// source; nil uses time.Now (tests inject a fixed clock).
func Clock(now func() time.Time) Tool {
	if now == nil {
		now = time.Now
	}
	return Tool{
		Name:        ClockName,
		Description: "Returns the current date and time in UTC, in RFC 3339 format.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		Handler: func(ctx context.Context, _ json.RawMessage, _ Env) (string, error) {
			return now().UTC().Format(time.RFC3339), nil
		},
	}
}

// Calculator returns the "calculator" tool: arguments {"expression":
// string}, the result is the value as a decimal number (see [Calculate]),
// e.g. "84". A malformed expression or a division by zero is an error
// result that says where.
func Calculator() Tool {
	return Tool{
		Name: CalculatorName,
		Description: "Evaluates an arithmetic expression with decimal numbers, + - * /, unary minus and " +
			"parentheses, e.g. \"12*(3+4)\" or \"-1.5/3\". Returns the result as a number.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string","minLength":1,"maxLength":1000,` +
			`"description":"The expression to evaluate."}},"required":["expression"],"additionalProperties":false}`),
		Handler: func(ctx context.Context, args json.RawMessage, _ Env) (string, error) {
			var a struct {
				Expression string `json:"expression"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			v, err := Calculate(a.Expression)
			if err != nil {
				return "", err
			}
			return FormatNumber(v), nil
		},
	}
}

// errNoState is the error of the kv tools when the worker passed no State.
var errNoState = errors.New("no key-value state is available for this thread")

// KVGet returns the "kv_get" tool: arguments {"key": string}, the result
// is JSON, {"key":k,"found":true,"value":<the JSON value>} or
// {"key":k,"found":false}. It reads [Env.State].
func KVGet() Tool {
	return Tool{
		Name:        KVGetName,
		Description: "Looks up a value the conversation stored earlier under a key (see kv_set).",
		Parameters: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string","minLength":1,"maxLength":256,` +
			`"description":"The key, e.g. \"my name\"."}},"required":["key"],"additionalProperties":false}`),
		Handler: func(ctx context.Context, args json.RawMessage, env Env) (string, error) {
			var a struct {
				Key string `json:"key"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			if env.State == nil {
				return "", errNoState
			}
			v, ok := env.State.Get(a.Key)
			if !ok {
				return encode(struct {
					Key   string `json:"key"`
					Found bool   `json:"found"`
				}{a.Key, false})
			}
			return encode(struct {
				Key   string          `json:"key"`
				Found bool            `json:"found"`
				Value json.RawMessage `json:"value"`
			}{a.Key, true, v})
		},
	}
}

// KVSet returns the "kv_set" tool: arguments {"key": string, "value": any
// JSON value}, the result is {"key":k,"stored":true}. It writes
// [Env.State]; an error from State.Set is an error result.
func KVSet() Tool {
	return Tool{
		Name:        KVSetName,
		Description: "Stores a value under a key in the conversation's memory, to be read later with kv_get.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string","minLength":1,"maxLength":256,` +
			`"description":"The key, e.g. \"my name\"."},"value":{"description":"Any JSON value."}},` +
			`"required":["key","value"],"additionalProperties":false}`),
		Handler: func(ctx context.Context, args json.RawMessage, env Env) (string, error) {
			var a struct {
				Key   string          `json:"key"`
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			if env.State == nil {
				return "", errNoState
			}
			if err := env.State.Set(a.Key, a.Value); err != nil {
				return "", fmt.Errorf("storing %q: %w", a.Key, err)
			}
			return encode(struct {
				Key    string `json:"key"`
				Stored bool   `json:"stored"`
			}{a.Key, true})
		},
	}
}

// encode writes compact JSON without HTML escaping.
func encode(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	var c bytes.Buffer
	if err := json.Compact(&c, bytes.TrimSpace(b.Bytes())); err != nil {
		return "", err
	}
	return c.String(), nil
}
