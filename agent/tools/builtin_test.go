package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/tools"
	"github.com/convlog/convlog/events"
)

var fixed = time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("CET", 3600))

func builtins(t *testing.T) *tools.Registry {
	return newRegistry(t, tools.Config{}, tools.Builtins(func() time.Time { return fixed })...)
}

func TestClockReturnsTheInjectedTimeInUTC(t *testing.T) {
	res := builtins(t).Run(context.Background(), call("clock", `{}`), tools.Env{})
	require.False(t, res.IsError)
	require.Equal(t, "2026-01-02T02:04:05Z", res.Content.String())

	res = builtins(t).Run(context.Background(), call("clock", `{"tz":"x"}`), tools.Env{})
	require.True(t, res.IsError, "clock takes no arguments")

	res = newRegistry(t, tools.Config{}, tools.Clock(nil)).Run(context.Background(), call("clock", ``), tools.Env{})
	got, err := time.Parse(time.RFC3339, res.Content.String())
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), got, time.Minute, "nil uses the wall clock")
}

func TestCalculatorTool(t *testing.T) {
	r := builtins(t)
	res := r.Run(context.Background(), call("calculator", `{"expression":"12*(3+4)"}`), tools.Env{})
	require.Equal(t, events.ToolResult{ToolCallID: "call_1", Name: "calculator", Content: events.Text("84")}, res)

	res = r.Run(context.Background(), call("calculator", `{"expression":"1/0"}`), tools.Env{})
	require.True(t, res.IsError)
	require.Equal(t, `tool "calculator" failed: division by zero at position 2`, res.Content.String())

	res = r.Run(context.Background(), call("calculator", `{"expr":"1"}`), tools.Env{})
	require.True(t, res.IsError)
	require.Contains(t, res.Content.String(), "missing property 'expression'")
}

func TestKVToolsReadAndWriteTheThreadState(t *testing.T) {
	r := builtins(t)
	st := tools.NewMemState(map[string]json.RawMessage{"color": json.RawMessage(`"blue"`)})
	env := tools.Env{State: st}

	res := r.Run(context.Background(), call("kv_get", `{"key":"color"}`), env)
	require.Equal(t, `{"key":"color","found":true,"value":"blue"}`, res.Content.String())

	res = r.Run(context.Background(), call("kv_get", `{"key":"my name"}`), env)
	require.Equal(t, `{"key":"my name","found":false}`, res.Content.String())

	res = r.Run(context.Background(), call("kv_set", `{"key":"my name","value":{"first": "Ada", "tags": ["<x>"]}}`), env)
	require.False(t, res.IsError, res.Content.String())
	require.Equal(t, `{"key":"my name","stored":true}`, res.Content.String())

	res = r.Run(context.Background(), call("kv_get", `{"key":"my name"}`), env)
	require.Equal(t, `{"key":"my name","found":true,"value":{"first":"Ada","tags":["<x>"]}}`, res.Content.String())

	require.Equal(t, []events.StateSet{{Key: "my name", Value: json.RawMessage(`{"first":"Ada","tags":["<x>"]}`)}}, st.Changes())

	res = r.Run(context.Background(), call("kv_set", `{"key":"k"}`), env)
	require.True(t, res.IsError, "kv_set needs a value")
	res = r.Run(context.Background(), call("kv_set", `{"key":"","value":1}`), env)
	require.True(t, res.IsError, "the key must not be empty")
}

type failingState struct{}

func (failingState) Get(string) (json.RawMessage, bool) { return nil, false }
func (failingState) Set(string, json.RawMessage) error  { return errors.New("state is read-only") }

func TestKVToolsWithoutOrWithAFailingStateGiveErrorResults(t *testing.T) {
	r := builtins(t)
	for _, c := range []events.ToolCall{call("kv_get", `{"key":"a"}`), call("kv_set", `{"key":"a","value":1}`)} {
		res := r.Run(context.Background(), c, tools.Env{})
		require.True(t, res.IsError)
		require.Contains(t, res.Content.String(), "no key-value state is available")
	}
	res := r.Run(context.Background(), call("kv_set", `{"key":"a","value":1}`), tools.Env{State: failingState{}})
	require.True(t, res.IsError)
	require.Equal(t, `tool "kv_set" failed: storing "a": state is read-only`, res.Content.String())
}

func TestMemStateKeepsTheLastValueOfEachKeyInFirstSetOrder(t *testing.T) {
	initial := map[string]json.RawMessage{"a": json.RawMessage(`1`)}
	st := tools.NewMemState(initial)
	require.NoError(t, st.Set("b", json.RawMessage(` [1, 2] `)))
	require.NoError(t, st.Set("a", json.RawMessage(`2`)))
	require.NoError(t, st.Set("b", json.RawMessage(`3`)))
	require.Equal(t, []events.StateSet{{Key: "b", Value: json.RawMessage(`3`)}, {Key: "a", Value: json.RawMessage(`2`)}}, st.Changes())
	v, ok := st.Get("a")
	require.True(t, ok)
	require.JSONEq(t, `2`, string(v))
	require.JSONEq(t, `1`, string(initial["a"]), "the initial map is copied")

	require.ErrorContains(t, st.Set("", json.RawMessage(`1`)), "empty")
	require.ErrorContains(t, st.Set(string(make([]byte, 257)), json.RawMessage(`1`)), "limit is 256")
	require.ErrorContains(t, st.Set("x", json.RawMessage(`{`)), "not JSON")
	require.ErrorContains(t, st.Set("\xff", json.RawMessage(`1`)), "UTF-8")
	require.Len(t, st.Changes(), 2, "failed sets change nothing")
	_, ok = tools.NewMemState(nil).Get("a")
	require.False(t, ok)
}
