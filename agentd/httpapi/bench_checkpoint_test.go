package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// langGraphMessages is a LangGraph "messages" channel value as
// @convlog/langgraph stores it: the serializer's JSON of n LangChain
// messages (constructor form, as langchain-core's JSON serializer writes
// them), about 1 KB each.
func langGraphMessages(n int) any {
	ms := make([]any, n)
	for i := range ms {
		kind := "HumanMessage"
		if i%2 == 1 {
			kind = "AIMessage"
		}
		ms[i] = map[string]any{"lc": 1, "type": "constructor", "id": []string{"langchain_core", "messages", kind},
			"kwargs": map[string]any{
				"content":            strings.Repeat(fmt.Sprintf("turn %d of the conversation, with some text in it. ", i), 14),
				"id":                 fmt.Sprintf("run-%08d-0000-4000-8000-000000000000", i),
				"additional_kwargs":  map[string]any{},
				"response_metadata":  map[string]any{"model_name": "gpt-4o-mini", "finish_reason": "stop", "usage": map[string]any{"prompt_tokens": 120 + i, "completion_tokens": 40}},
				"tool_calls":         []any{},
				"invalid_tool_calls": []any{},
			}}
	}
	return ms
}

// event is an event of a request with its members in the order
// @convlog/langgraph writes them.
type event struct {
	Type    string `json:"type"`
	Payload any    `json:"payload"`
}

// checkpointBody is the body of @convlog/langgraph's put: one
// checkpoint.saved event whose channels hold the messages (about kb KB of
// JSON), a scratchpad of a few KB and small values.
func checkpointBody(tb testing.TB, id, parent string, kb int) []byte {
	value := func(v any) map[string]any { return map[string]any{"type": "json", "json": v} }
	versions := map[string]any{"__start__": "00000000000000000000000000000002.0.1", "messages": "00000000000000000000000000000005.0.2", "agent": "00000000000000000000000000000004.0.3", "tools": "00000000000000000000000000000003.0.4"}
	cp := map[string]any{"v": 4, "id": id, "ts": "2026-11-29T01:00:00.000Z", "channel_values": map[string]any{},
		"channel_versions": versions, "versions_seen": map[string]any{"__input__": map[string]any{}, "__start__": map[string]any{"__start__": "00000000000000000000000000000001.0.5"}, "agent": versions, "tools": versions}}
	scratch := make([]any, 40)
	for i := range scratch {
		scratch[i] = map[string]any{"step": i, "note": strings.Repeat("x", 60), "score": float64(i) / 3}
	}
	payload := map[string]any{"id": id, "parent": parent, "checkpoint": value(cp),
		"metadata": value(map[string]any{"source": "loop", "step": 5, "parents": map[string]any{}, "writes": map[string]any{"agent": map[string]any{"messages": langGraphMessages(1)}}}),
		"channels": map[string]any{
			"messages":   value(langGraphMessages(kb)),
			"scratchpad": value(scratch),
			"agent":      value("agent"),
			"remaining":  value(24),
		}}
	b, err := json.Marshal(map[string]any{"events": []any{event{"checkpoint.saved", payload}}})
	require.NoError(tb, err)
	return b
}

// writesBody is the body of @convlog/langgraph's putWrites: one
// checkpoint.writes event with an AI message of about 1 KB and two small
// writes.
func writesBody(tb testing.TB, cp, task string) []byte {
	value := func(v any) map[string]any { return map[string]any{"type": "json", "json": v} }
	writes := []any{
		map[string]any{"idx": 0, "channel": "messages", "value": value(langGraphMessages(1))},
		map[string]any{"idx": 1, "channel": "agent", "value": value("agent")},
		map[string]any{"idx": 2, "channel": "branch:to:tools", "value": value(nil)},
	}
	b, err := json.Marshal(map[string]any{"events": []any{event{"checkpoint.writes",
		map[string]any{"checkpoint": cp, "task": task, "path": "~__pregel_pull, agent", "writes": writes}}}})
	require.NoError(tb, err)
	return b
}

// BenchmarkAppendCheckpoint measures the append handler (called in
// process, no HTTP client) on LangGraph checkpoint bodies: put (a
// checkpoint.saved with a messages channel of about 20 KB of JSON and a
// few smaller values) and putWrites (a checkpoint.writes), each appended
// to an embedded JetStream server.
//
//	go test ./agentd/httpapi/ -run '^$' -bench AppendCheckpoint -benchmem
func BenchmarkAppendCheckpoint(b *testing.B) {
	e := newEnv(b, withoutWorkers())
	h := e.api.Handler()
	post := func(b *testing.B, id string, body []byte) {
		req := httptest.NewRequest("POST", "/v1/threads/"+id+"/events", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+keyAcme)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatalf("append: %d %s", rec.Code, rec.Body)
		}
	}
	// A thread takes a bounded number of checkpoints per benchmark round
	// so that its state stays of the size a graph's thread has.
	const perThread = 100
	b.Run("put", func(b *testing.B) {
		bodies := make([][]byte, perThread)
		for i := range bodies {
			bodies[i] = checkpointBody(b, fmt.Sprintf("1ef%013d", i+1), fmt.Sprintf("1ef%013d", i), 20)
		}
		var id string
		n := 0
		for b.Loop() {
			if n%perThread == 0 {
				b.StopTimer()
				id = e.createThread(map[string]any{"replies": "off"})
				b.StartTimer()
			}
			post(b, id, bodies[n%perThread])
			n++
		}
		b.ReportMetric(float64(len(bodies[0])), "body-bytes")
	})
	b.Run("putWrites", func(b *testing.B) {
		id := e.createThread(map[string]any{"replies": "off"})
		post(b, id, checkpointBody(b, "1ef0000000000001", "", 1))
		body := writesBody(b, "1ef0000000000001", "task-1")
		n := 0
		for b.Loop() {
			if n > 0 && n%perThread == 0 {
				b.StopTimer()
				id = e.createThread(map[string]any{"replies": "off"})
				post(b, id, checkpointBody(b, "1ef0000000000001", "", 1))
				b.StartTimer()
			}
			post(b, id, body)
			n++
		}
		b.ReportMetric(float64(len(body)), "body-bytes")
	})
}
