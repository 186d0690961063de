package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agent/model/modeltest"
	"github.com/convlog/convlog/events"
)

func newOpenAI(t *testing.T, f *fakeOpenAI, mod func(*model.OpenAIConfig)) *model.OpenAI {
	t.Helper()
	cfg := model.OpenAIConfig{BaseURL: f.url(), APIKey: "sk-test", Model: "fake-model"}
	if mod != nil {
		mod(&cfg)
	}
	p, err := model.NewOpenAI(cfg)
	require.NoError(t, err)
	return p
}

func TestOpenAIConformance(t *testing.T) {
	modeltest.Run(t, func(t *testing.T) model.Provider { return newOpenAI(t, newFakeOpenAI(t), nil) },
		modeltest.Options{Deterministic: true})
}

func userMsg(s string) events.Message {
	return events.Message{Role: events.RoleUser, Content: events.Text(s)}
}

var calcTool = model.Tool{Name: "calculator", Description: "Evaluates arithmetic.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}`)}

func TestOpenAIAccumulatesToolCallArgumentsStreamedOverSeveralChunks(t *testing.T) {
	f := newFakeOpenAI(t)
	p := newOpenAI(t, f, nil)
	var deltas []model.Delta
	resp, err := p.Generate(context.Background(), model.Request{Thread: "t1",
		Messages: []events.Message{userMsg("what is 6*7")}, Tools: []model.Tool{calcTool}},
		func(d model.Delta) { deltas = append(deltas, d) })
	require.NoError(t, err)
	require.Equal(t, []events.ToolCall{{ID: "call_fake_1", Name: "calculator", Arguments: `{"expression": "6*7"}`}}, resp.ToolCalls)
	require.True(t, resp.Content.IsNull(), "a tool-call-only turn has null content")
	require.Equal(t, "tool_calls", resp.FinishReason)
	require.Equal(t, "fake-model", resp.Model)
	require.Equal(t, &events.Usage{InputTokens: 11, OutputTokens: 7, TotalTokens: 18}, resp.Usage)
	require.Len(t, deltas, 4, "one fragment with id and name, three argument pieces")
	require.Equal(t, model.ToolCallDelta{Index: 0, ID: "call_fake_1", Name: "calculator"}, *deltas[0].ToolCall)
	require.Equal(t, `ession": "6*`, deltas[2].ToolCall.Arguments)
}

func TestOpenAISendsTheHistoryInChatCompletionsFormat(t *testing.T) {
	f := newFakeOpenAI(t)
	p := newOpenAI(t, f, func(c *model.OpenAIConfig) {
		c.Headers = map[string]string{"X-Extra": "yes"}
		c.MaxTokens = 100
	})
	req := model.Request{
		Thread:       "t1",
		Model:        "other-model",
		SystemPrompt: "You are terse.",
		Messages: []events.Message{
			userMsg("what is 6*7"),
			{Role: events.RoleAssistant, ToolCalls: []events.ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"expression":"6*7"}`}}},
			{Role: events.RoleTool, ToolCallID: "c1", Name: "calculator", Content: events.Text("42"), IsError: false},
			{Role: events.RoleAssistant, Content: events.Text("42."), Reasoning: "easy"},
			{Role: events.RoleUser, Content: events.Parts(events.Part{Type: events.PartText, Text: "and this?"},
				events.Part{Type: events.PartImage, Data: "AAAA", MediaType: "image/png"})},
		},
		Tools: []model.Tool{calcTool, {Name: "clock"}},
	}
	resp, err := p.Generate(context.Background(), req, nil)
	require.NoError(t, err)
	require.Equal(t, "Hi! You said: [map[text:and this? type:text] map[image_url:map[url:data:image/png;base64,AAAA] type:image_url]]", resp.Content.String())

	got := f.lastRequest(t)
	require.Equal(t, "other-model", got.Model)
	require.True(t, got.Stream)
	require.JSONEq(t, `{"include_usage":true}`, string(*got.StreamOptions))
	var body map[string]any
	require.NoError(t, json.Unmarshal(got.Raw, &body))
	require.EqualValues(t, 100, body["max_completion_tokens"])
	want := `[
		{"role":"system","content":"You are terse."},
		{"role":"user","content":"what is 6*7"},
		{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"6*7\"}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"42"},
		{"role":"assistant","content":"42."},
		{"role":"user","content":[{"type":"text","text":"and this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}
	]`
	gotMsgs, err := json.Marshal(got.Messages)
	require.NoError(t, err)
	require.JSONEq(t, want, string(gotMsgs))
	gotTools, err := json.Marshal(got.Tools)
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"type":"function","function":{"name":"calculator","description":"Evaluates arithmetic.","parameters":{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}}},
		{"type":"function","function":{"name":"clock","parameters":{"type":"object","properties":{}}}}
	]`, string(gotTools))
	f.mu.Lock()
	h := f.headers[len(f.headers)-1]
	f.mu.Unlock()
	require.Equal(t, "Bearer sk-test", h.Get("Authorization"))
	require.Equal(t, "yes", h.Get("X-Extra"))
}

func TestOpenAIWithoutKeySendsNoAuthorizationAndNoUsageWhenDisabled(t *testing.T) {
	f := newFakeOpenAI(t)
	p := newOpenAI(t, f, func(c *model.OpenAIConfig) { c.APIKey = ""; c.DisableStreamUsage = true })
	resp, err := p.Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("hi")}}, nil)
	require.NoError(t, err)
	require.Nil(t, resp.Usage)
	require.Nil(t, f.lastRequest(t).StreamOptions)
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Empty(t, f.headers[0].Get("Authorization"))
}

// script sets a custom answer on f.
func script(f *fakeOpenAI, s func(w http.ResponseWriter, r *http.Request, req fakeRequest)) {
	f.mu.Lock()
	f.script = s
	f.mu.Unlock()
}

func TestOpenAIReadsReasoningContentAndReasoning(t *testing.T) {
	f := newFakeOpenAI(t)
	script(f, func(w http.ResponseWriter, r *http.Request, req fakeRequest) {
		s := newSSE(w)
		s.chunk("m", map[string]any{"role": "assistant", "reasoning_content": "Think "})
		s.chunk("m", map[string]any{"reasoning": "hard."})
		s.chunk("m", map[string]any{"content": "Done."})
		s.finish("m", "stop")
		s.done()
	})
	var acc model.Accumulator
	resp, err := newOpenAI(t, f, nil).Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("x")}}, acc.Add)
	require.NoError(t, err)
	require.Equal(t, "Think hard.", resp.Reasoning)
	require.Equal(t, events.Text("Done."), resp.Content)
	require.Equal(t, "Think hard.", acc.Reasoning())
	require.Equal(t, "m", resp.Model)
}

func TestOpenAIMergesInterleavedParallelToolCallsByIndex(t *testing.T) {
	f := newFakeOpenAI(t)
	script(f, func(w http.ResponseWriter, r *http.Request, req fakeRequest) {
		s := newSSE(w)
		call := func(i int, id, name, args string) map[string]any {
			c := map[string]any{"index": i, "function": map[string]any{"arguments": args}}
			if id != "" {
				c["id"], c["type"] = id, "function"
				c["function"].(map[string]any)["name"] = name
			}
			return map[string]any{"tool_calls": []any{c}}
		}
		s.chunk("m", map[string]any{"content": "Let me check. "})
		s.chunk("m", call(0, "a", "clock", ""))
		s.chunk("m", call(1, "b", "calculator", `{"expression":`))
		s.chunk("m", call(0, "", "", `{}`))
		s.chunk("m", call(1, "", "", `"1+1"}`))
		s.finish("m", "tool_calls")
		s.done()
	})
	var acc model.Accumulator
	resp, err := newOpenAI(t, f, nil).Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("x")}}, acc.Add)
	require.NoError(t, err)
	require.Equal(t, []events.ToolCall{{ID: "a", Name: "clock", Arguments: "{}"}, {ID: "b", Name: "calculator", Arguments: `{"expression":"1+1"}`}}, resp.ToolCalls)
	require.Equal(t, events.Text("Let me check. "), resp.Content, "text beside tool calls is kept")
	require.Equal(t, resp.ToolCalls, acc.ToolCalls())
}

func TestOpenAISplitsCallsThatShareAnIndexButNotAnID(t *testing.T) {
	// Older Ollama versions send every call complete, without an index.
	f := newFakeOpenAI(t)
	script(f, func(w http.ResponseWriter, r *http.Request, req fakeRequest) {
		s := newSSE(w)
		s.chunk("m", map[string]any{"tool_calls": []any{
			map[string]any{"id": "x1", "type": "function", "function": map[string]any{"name": "clock", "arguments": "{}"}},
			map[string]any{"id": "x2", "type": "function", "function": map[string]any{"name": "kv_get", "arguments": `{"key":"a"}`}},
		}})
		s.finish("m", "tool_calls")
		s.done()
	})
	var acc model.Accumulator
	resp, err := newOpenAI(t, f, nil).Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("x")}}, acc.Add)
	require.NoError(t, err)
	require.Equal(t, []events.ToolCall{{ID: "x1", Name: "clock", Arguments: "{}"}, {ID: "x2", Name: "kv_get", Arguments: `{"key":"a"}`}}, resp.ToolCalls)
	require.Equal(t, resp.ToolCalls, acc.ToolCalls())
}

func TestOpenAIGivesCallsWithoutIDOrArgumentsAnIDAndEmptyObject(t *testing.T) {
	f := newFakeOpenAI(t)
	script(f, func(w http.ResponseWriter, r *http.Request, req fakeRequest) {
		s := newSSE(w)
		s.chunk("m", map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"name": "clock"}}}})
		s.finish("m", "tool_calls")
		s.done()
	})
	var acc model.Accumulator
	resp, err := newOpenAI(t, f, nil).Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("x")}}, acc.Add)
	require.NoError(t, err)
	require.Equal(t, []events.ToolCall{{ID: "call_0", Name: "clock", Arguments: "{}"}}, resp.ToolCalls)
	require.Equal(t, resp.ToolCalls, acc.ToolCalls(), "the synthesized id and arguments are streamed too")
}

func TestOpenAIErrors(t *testing.T) {
	jsonError := func(status int, msg string, hdr map[string]string) func(w http.ResponseWriter, r *http.Request, req fakeRequest) {
		return func(w http.ResponseWriter, r *http.Request, req fakeRequest) {
			for k, v := range hdr {
				w.Header().Set(k, v)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error":{"message":"` + msg + `","type":"x","code":"y","param":null}}`))
		}
	}
	streamed := func(lines ...string) func(w http.ResponseWriter, r *http.Request, req fakeRequest) {
		return func(w http.ResponseWriter, r *http.Request, req fakeRequest) {
			s := newSSE(w)
			for _, l := range lines {
				s.raw(l)
			}
		}
	}
	chunk := func(delta, finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
	}
	cases := []struct {
		name      string
		script    func(w http.ResponseWriter, r *http.Request, req fakeRequest)
		retries   int
		status    int
		retryable bool
		message   string
		requests  int
	}{
		{name: "a bad key is a 401 that is not retryable", script: jsonError(401, "Incorrect API key provided", nil),
			status: 401, message: "Incorrect API key provided", requests: 1},
		{name: "an unknown model is a 404 that is not retryable", script: jsonError(404, "model not found", nil),
			status: 404, message: "model not found", requests: 1},
		{name: "a rate limit is retryable", script: jsonError(429, "slow down", nil), retries: -1,
			status: 429, retryable: true, message: "slow down", requests: 1},
		{name: "a server error is retried by the SDK, then retryable", script: jsonError(500, "boom", map[string]string{"Retry-After-Ms": "1"}),
			retries: 2, status: 500, retryable: true, message: "boom", requests: 3},
		{name: "an error event in the stream is retryable", script: streamed(chunk(`{"content":"Hel"}`, ""), `{"error":{"message":"overloaded"}}`),
			retryable: true, message: "overloaded", requests: 1},
		{name: "a stream cut before finish_reason is retryable", script: streamed(chunk(`{"content":"Hel"}`, ""), "[DONE]"),
			retryable: true, message: "no finish_reason", requests: 1},
		{name: "a stream with no choice is retryable", script: streamed("[DONE]"),
			retryable: true, message: "without a choice", requests: 1},
		{name: "tool arguments that are not JSON are retryable", script: streamed(chunk(`{"tool_calls":[{"index":0,"id":"a","function":{"name":"clock","arguments":"{\"x"}}]}`, "length"), "[DONE]"),
			retryable: true, message: "not valid JSON", requests: 1},
		{name: "a tool call without a name is not retryable", script: streamed(chunk(`{"tool_calls":[{"index":0,"id":"a","function":{"arguments":"{}"}}]}`, "tool_calls"), "[DONE]"),
			message: "has no function name", requests: 1},
		{name: "a malformed chunk is not retryable", script: streamed(`{"id":`),
			message: "malformed stream chunk", requests: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeOpenAI(t)
			script(f, c.script)
			p := newOpenAI(t, f, func(cfg *model.OpenAIConfig) { cfg.MaxRetries = c.retries })
			_, err := p.Generate(context.Background(), model.Request{Thread: "t1", Messages: []events.Message{userMsg("x")}}, nil)
			var ae *model.APIError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, c.status, ae.StatusCode)
			require.Equal(t, c.retryable, ae.Retryable, "%v", err)
			require.Equal(t, c.retryable, model.IsRetryable(err))
			require.Contains(t, err.Error(), c.message)
			require.Contains(t, err.Error(), `"fake-model", thread t1`, "the error names the model and the thread")
			require.Equal(t, c.requests, f.count())
		})
	}
}

func TestOpenAIConnectionRefusedIsRetryable(t *testing.T) {
	f := newFakeOpenAI(t)
	p := newOpenAI(t, f, func(c *model.OpenAIConfig) { c.MaxRetries = -1 })
	f.Close()
	_, err := p.Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("x")}}, nil)
	var ae *model.APIError
	require.ErrorAs(t, err, &ae)
	require.True(t, ae.Retryable)
	require.Zero(t, ae.StatusCode)
}

func TestOpenAIBadToolSchemaFailsBeforeSending(t *testing.T) {
	f := newFakeOpenAI(t)
	_, err := newOpenAI(t, f, nil).Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("x")},
		Tools: []model.Tool{{Name: "bad", Parameters: json.RawMessage(`[1]`)}}}, nil)
	require.ErrorContains(t, err, `tool "bad"`)
	require.False(t, model.IsRetryable(err))
	require.Zero(t, f.count())
}

func TestOpenAICancelWhileTheServerIsStillStreaming(t *testing.T) {
	f := newFakeOpenAI(t)
	disconnected := make(chan struct{})
	script(f, func(w http.ResponseWriter, r *http.Request, req fakeRequest) {
		s := newSSE(w)
		s.chunk("m", map[string]any{"reasoning_content": "Hmm.", "content": "Hello"})
		<-r.Context().Done()
		close(disconnected)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var deltas atomic.Int32
	go func() {
		_, err := newOpenAI(t, f, nil).Generate(ctx, model.Request{Messages: []events.Message{userMsg("x")}},
			func(model.Delta) { deltas.Add(1); cancel() })
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, int32(1), deltas.Load(), "no delta after cancel, not even from the same chunk")
	case <-time.After(modeltest.Prompt):
		t.Fatal("Generate did not return after cancel")
	}
	select {
	case <-disconnected:
	case <-time.After(modeltest.Prompt):
		t.Fatal("the request to the server was not closed")
	}
}

func TestOpenAITimeoutAppliesOnlyWithoutACallerDeadline(t *testing.T) {
	f := newFakeOpenAI(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	script(f, func(w http.ResponseWriter, r *http.Request, req fakeRequest) {
		s := newSSE(w)
		s.chunk("m", map[string]any{"content": "Hel"})
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	p := newOpenAI(t, f, func(c *model.OpenAIConfig) { c.Timeout = 50 * time.Millisecond; c.MaxRetries = -1 })
	_, err := p.Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("x")}}, nil)
	var ae *model.APIError
	require.ErrorAs(t, err, &ae)
	require.True(t, ae.Retryable)
	require.Contains(t, ae.Message, "no complete answer within 50ms")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = p.Generate(ctx, model.Request{Messages: []events.Message{userMsg("x")}}, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the caller's deadline wins and is returned as ctx.Err()")
	require.False(t, model.IsRetryable(err))
}

func TestOpenAIConfigValidateReportsEveryProblem(t *testing.T) {
	bad := -1.0
	err := model.OpenAIConfig{BaseURL: "ftp://x", MaxTokens: -1, Temperature: &bad, APIKey: "sk\n"}.Validate()
	require.Error(t, err)
	for _, s := range []string{"BaseURL", "MaxTokens", "Temperature", "APIKey"} {
		require.ErrorContains(t, err, s)
	}
	require.NoError(t, model.OpenAIConfig{}.Validate(), "the zero value is valid")
	require.NoError(t, model.DefaultOpenAIConfig().Validate())
	_, err = model.NewOpenAI(model.OpenAIConfig{BaseURL: "localhost:8000"})
	require.Error(t, err, "a base URL without scheme is refused")
	require.False(t, errors.Is(err, model.ErrDiverged))
}
