package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agent/tools"
	"github.com/convlog/convlog/events"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newRegistry(t *testing.T, cfg tools.Config, ts ...tools.Tool) *tools.Registry {
	t.Helper()
	r, err := tools.NewRegistry(cfg)
	require.NoError(t, err)
	require.NoError(t, r.Register(ts...))
	return r
}

func echoTool(name string) tools.Tool {
	return tools.Tool{Name: name, Description: "echoes",
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`),
		Handler: func(ctx context.Context, args json.RawMessage, env tools.Env) (string, error) {
			var a struct{ Text string }
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			return a.Text, nil
		}}
}

func call(name, args string) events.ToolCall {
	return events.ToolCall{ID: "call_1", Name: name, Arguments: args}
}

func TestRegisterRejectsBadToolsAllAtOnceAndRegistersNone(t *testing.T) {
	r, err := tools.NewRegistry(tools.Config{})
	require.NoError(t, err)
	require.NoError(t, r.Register(echoTool("echo")))
	ok := func(context.Context, json.RawMessage, tools.Env) (string, error) { return "", nil }
	err = r.Register(
		tools.Tool{Name: "fine", Handler: ok},
		tools.Tool{Name: "has space", Handler: ok},
		tools.Tool{Name: "nohandler"},
		tools.Tool{Name: "badschema", Handler: ok, Parameters: json.RawMessage(`{"type":"nonsense"}`)},
		tools.Tool{Name: "notobject", Handler: ok, Parameters: json.RawMessage(`true`)},
		tools.Tool{Name: "notjson", Handler: ok, Parameters: json.RawMessage(`{`)},
		tools.Tool{Name: "remote", Handler: ok, Parameters: json.RawMessage(`{"$ref":"https://example.com/s.json"}`)},
		tools.Tool{Name: "negative", Handler: ok, Timeout: -time.Second},
		tools.Tool{Name: "echo", Handler: ok},
		tools.Tool{Name: "twice", Handler: ok},
		tools.Tool{Name: "twice", Handler: ok},
	)
	require.ErrorIs(t, err, tools.ErrInvalidTool)
	require.ErrorIs(t, err, tools.ErrDuplicateTool)
	for _, s := range []string{`"has space"`, `"nohandler"`, `"badschema"`, `"notobject"`, `"notjson"`, `"remote"`,
		`"negative"`, `"echo" is already registered`, `"twice" is given twice`} {
		require.ErrorContains(t, err, s)
	}
	require.NotContains(t, err.Error(), `"fine"`)
	require.Equal(t, []string{"echo"}, r.Names(), "a failed Register adds nothing")
}

func TestSpecsAreSortedAndConvertToModelTools(t *testing.T) {
	r := newRegistry(t, tools.Config{}, tools.Builtins(nil)...)
	specs := r.Specs()
	var names []string
	var offered []model.Tool
	for _, s := range specs {
		names = append(names, s.Name)
		offered = append(offered, model.Tool(s))
		require.True(t, json.Valid(s.Parameters), s.Name)
		require.NotEmpty(t, s.Description, s.Name)
	}
	require.Equal(t, []string{"calculator", "clock", "kv_get", "kv_set"}, names)
	require.Equal(t, specs[0].Parameters, offered[0].Parameters)

	r = newRegistry(t, tools.Config{}, tools.Tool{Name: "noparams", Handler: func(context.Context, json.RawMessage, tools.Env) (string, error) { return "ok", nil }})
	require.JSONEq(t, `{"type":"object","properties":{}}`, string(r.Specs()[0].Parameters), "nil parameters become an empty object schema")
}

func TestRunTurnsEveryFailureIntoAnErrorResult(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	// Failures that are not timeouts run under a timeout no loaded machine
	// reaches; the timeout cases have a registry of their own.
	r := newRegistry(t, tools.Config{Timeout: time.Minute},
		echoTool("echo"),
		tools.Tool{Name: "fails", Handler: func(context.Context, json.RawMessage, tools.Env) (string, error) {
			return "", errors.New("the disk is full")
		}},
		tools.Tool{Name: "panics", Handler: func(context.Context, json.RawMessage, tools.Env) (string, error) {
			panic("boom")
		}},
		tools.Tool{Name: "panics_uncomparable", Handler: func(context.Context, json.RawMessage, tools.Env) (string, error) {
			panic([]int{1})
		}},
		tools.Tool{Name: "own_timeout", Timeout: time.Millisecond, Handler: func(ctx context.Context, _ json.RawMessage, _ tools.Env) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}},
	)
	timed := newRegistry(t, tools.Config{Timeout: 20 * time.Millisecond},
		tools.Tool{Name: "slow", Handler: func(ctx context.Context, _ json.RawMessage, _ tools.Env) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}},
		tools.Tool{Name: "ignores_ctx", Handler: func(ctx context.Context, _ json.RawMessage, _ tools.Env) (string, error) {
			<-release
			return "too late", nil
		}},
	)
	cases := []struct {
		name string
		r    *tools.Registry
		call events.ToolCall
		want string
	}{
		{"an unknown tool lists the available ones", r, call("nope", `{}`), `unknown tool "nope" (available: echo, fails, own_timeout, panics, panics_uncomparable)`},
		{"arguments that are not JSON", r, call("echo", `{"text":`), `invalid arguments for tool "echo": not valid JSON`},
		{"a missing required argument", r, call("echo", `{}`), `invalid arguments for tool "echo": at the top level: missing property 'text'`},
		{"an argument of the wrong type", r, call("echo", `{"text":5}`), `at '/text': got number, want string`},
		{"an unexpected argument", r, call("echo", `{"text":"a","x":1}`), `additional properties 'x' not allowed`},
		{"empty arguments are {} and still checked", r, call("echo", ``), `missing property 'text'`},
		{"a handler error", r, call("fails", `{}`), `tool "fails" failed: the disk is full`},
		{"a panic", r, call("panics", `{}`), `tool "panics" panicked: boom`},
		{"a panic with an uncomparable value", r, call("panics_uncomparable", `{}`), `tool "panics_uncomparable" panicked: [1]`},
		{"the registry timeout", timed, call("slow", `{}`), `tool "slow" timed out after 20ms`},
		{"a handler that ignores ctx still times out", timed, call("ignores_ctx", `{}`), `tool "ignores_ctx" timed out after 20ms`},
		{"a per-tool timeout", r, call("own_timeout", `{}`), `tool "own_timeout" timed out after 1ms`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := c.r.Run(context.Background(), c.call, tools.Env{})
			require.True(t, res.IsError)
			require.Equal(t, c.call.ID, res.ToolCallID)
			require.Equal(t, c.call.Name, res.Name)
			require.Contains(t, res.Content.String(), c.want)
			requireValidResult(t, res)
		})
	}
}

func requireValidResult(t *testing.T, res events.ToolResult) {
	t.Helper()
	e := events.Event{ID: "01890a5d-ac96-774b-bcce-b302099a8057", Type: events.TypeToolResult, Tenant: "default",
		Thread: "t", Time: time.Now(), SchemaVersion: events.SchemaVersion, Payload: res}
	require.NoError(t, e.Validate())
}

func TestRunReturnsTheHandlerOutput(t *testing.T) {
	r := newRegistry(t, tools.Config{}, echoTool("echo"))
	res := r.Run(context.Background(), call("echo", ` {"text":"hi <there>"} `), tools.Env{})
	require.Equal(t, events.ToolResult{ToolCallID: "call_1", Name: "echo", Content: events.Text("hi <there>")}, res)
}

func TestRunReplacesInvalidUTF8InTheOutput(t *testing.T) {
	r := newRegistry(t, tools.Config{}, tools.Tool{Name: "binary", Handler: func(context.Context, json.RawMessage, tools.Env) (string, error) {
		return "ok\xff\xfe!", nil
	}})
	res := r.Run(context.Background(), call("binary", `{}`), tools.Env{})
	require.Equal(t, "ok\uFFFD!", res.Content.String())
	requireValidResult(t, res)
}

func TestRunReportsCancellationOfTheCallersCtx(t *testing.T) {
	started := make(chan struct{})
	r := newRegistry(t, tools.Config{}, tools.Tool{Name: "wait", Handler: func(ctx context.Context, _ json.RawMessage, _ tools.Env) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	res := r.Run(ctx, call("wait", `{}`), tools.Env{})
	require.True(t, res.IsError)
	require.Equal(t, `tool "wait" was cancelled: context canceled`, res.Content.String())

	res = r.Run(ctx, call("wait", `{}`), tools.Env{})
	require.Equal(t, `tool "wait" was cancelled: context canceled`, res.Content.String(), "a done ctx does not start the tool")
}

func TestRunCutsLongResults(t *testing.T) {
	r := newRegistry(t, tools.Config{MaxResultBytes: 10}, echoTool("echo"))
	res := r.Run(context.Background(), call("echo", `{"text":"ééééééééé"}`), tools.Env{})
	require.False(t, res.IsError)
	require.Equal(t, "ééééé\n[truncated: 10 of 18 bytes shown]", res.Content.String())
	res = r.Run(context.Background(), call("echo", `{"text":"aé34567890"}`), tools.Env{})
	require.Equal(t, "aé3456789\n[truncated: 10 of 11 bytes shown]", res.Content.String())
	res = r.Run(context.Background(), call("echo", `{"text":"aaaaaaaaaé"}`), tools.Env{})
	require.Equal(t, "aaaaaaaaa\n[truncated: 9 of 11 bytes shown]", res.Content.String(), "a rune is never split")
}

func TestRunIsSafeForConcurrentUse(t *testing.T) {
	r := newRegistry(t, tools.Config{}, echoTool("echo"))
	var wg sync.WaitGroup
	results := make([]events.ToolResult, 64)
	for i := range results {
		wg.Go(func() {
			if i%8 == 0 {
				// Registering while running is allowed.
				_ = r.Register(echoTool(fmt.Sprintf("echo%d", i)))
			}
			results[i] = r.Run(context.Background(), events.ToolCall{ID: fmt.Sprint(i), Name: "echo",
				Arguments: fmt.Sprintf(`{"text":"%d"}`, i)}, tools.Env{})
		})
	}
	wg.Wait()
	for i, res := range results {
		require.Equal(t, fmt.Sprint(i), res.Content.String())
		require.Equal(t, fmt.Sprint(i), res.ToolCallID)
	}
	require.Len(t, r.Names(), 9)
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, tools.Config{}.Validate())
	require.NoError(t, tools.DefaultConfig().Validate())
	_, err := tools.NewRegistry(tools.Config{Timeout: -1, MaxResultBytes: -1})
	require.ErrorContains(t, err, "Timeout")
	require.ErrorContains(t, err, "MaxResultBytes")
	require.False(t, strings.Contains(err.Error(), "\n\n"))
}
