package model_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeOpenAI is a local server that speaks the chat-completions streaming
// protocol: SSE "data: {chunk}" lines and "data: [DONE]".
type fakeOpenAI struct {
	*httptest.Server
	mu       sync.Mutex
	requests []fakeRequest
	headers  []http.Header
	// script, when set, answers instead of the built-in brain.
	script func(w http.ResponseWriter, r *http.Request, req fakeRequest)
}

// fakeRequest is the decoded request body.
type fakeRequest struct {
	Model         string           `json:"model"`
	Stream        bool             `json:"stream"`
	StreamOptions *json.RawMessage `json:"stream_options"`
	Messages      []map[string]any `json:"messages"`
	Tools         []map[string]any `json:"tools"`
	Raw           json.RawMessage  `json:"-"`
}

func newFakeOpenAI(t *testing.T) *fakeOpenAI {
	f := &fakeOpenAI{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeOpenAI) url() string { return f.URL + "/v1" }

func (f *fakeOpenAI) lastRequest(t *testing.T) fakeRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.requests, "the server got no request")
	return f.requests[len(f.requests)-1]
}

func (f *fakeOpenAI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req fakeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, fmt.Sprintf(`{"error":{"message":%q}}`, err.Error()), http.StatusBadRequest)
		return
	}
	req.Raw = body
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.headers = append(f.headers, r.Header.Clone())
	script := f.script
	f.mu.Unlock()
	if script != nil {
		script(w, r, req)
		return
	}
	brain(w, req)
}

// brain is the default fake model: after tool results it answers from them;
// when tools are offered and the user wrote arithmetic it calls the first
// tool with the arguments split over several chunks; otherwise it greets.
func brain(w http.ResponseWriter, req fakeRequest) {
	sse := newSSE(w)
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last["role"] == "tool":
		sse.text("fake-model", "The result is "+fmt.Sprint(last["content"])+".")
		sse.finish("fake-model", "stop")
	case len(req.Tools) > 0 && strings.ContainsAny(fmt.Sprint(last["content"]), "*+"):
		name := req.Tools[0]["function"].(map[string]any)["name"].(string)
		sse.chunk("fake-model", map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
			"index": 0, "id": "call_fake_1", "type": "function", "function": map[string]any{"name": name, "arguments": ""}}}})
		for _, piece := range []string{`{"expr`, `ession": "6*`, `7"}`} {
			sse.chunk("fake-model", map[string]any{"tool_calls": []any{map[string]any{
				"index": 0, "function": map[string]any{"arguments": piece}}}})
		}
		sse.finish("fake-model", "tool_calls")
	default:
		sse.text("fake-model", "Hi! You said: "+fmt.Sprint(last["content"]))
		sse.finish("fake-model", "stop")
	}
	if req.StreamOptions != nil {
		sse.usage("fake-model", 11, 7)
	}
	sse.done()
}

// sse writes chat-completion chunks.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

func (s *sse) raw(data string) {
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	if s.f != nil {
		s.f.Flush()
	}
}

func (s *sse) json(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	s.raw(string(b))
}

func (s *sse) chunk(model string, delta map[string]any) {
	s.json(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}})
}

func (s *sse) text(model, text string) {
	for i, w := range strings.SplitAfter(text, " ") {
		d := map[string]any{"content": w}
		if i == 0 {
			d["role"] = "assistant"
		}
		s.chunk(model, d)
	}
}

func (s *sse) finish(model, reason string) {
	s.json(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": reason}}})
}

func (s *sse) usage(model string, in, out int) {
	s.json(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
		"choices": []any{}, "usage": map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}})
}

func (s *sse) done() { s.raw("[DONE]") }
