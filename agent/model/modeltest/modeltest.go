// Package modeltest is the conformance suite every [model.Provider] runs.
//
//	func TestConformance(t *testing.T) {
//		modeltest.Run(t, func(t *testing.T) model.Provider { return newMyProvider(t) }, modeltest.Options{})
//	}
//
// It checks, each in its own subtest: a plain text answer; that folding the
// deltas gives the response exactly and that onDelta is never called
// concurrently or after Generate returned; a tool-call round trip (call,
// result, text answer that uses the result); that a cancelled or expired
// ctx makes Generate return promptly with ctx.Err(), also when cancelled
// while streaming; 8 concurrent Generates; and, when the provider says so,
// determinism. Every response must be a valid assistant-message event
// (events.Event.Validate). The provider must stream at least one delta for
// the text prompt (the cancellation test cancels from the first one).
package modeltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/events"
)

// Defaults of [Options].
const (
	DefaultTextPrompt = "Hello, how are you?"
	DefaultToolPrompt = "What is 6*7?"
	DefaultToolResult = "42"
	DefaultParallel   = 8
	// Prompt bounds how long a cancelled Generate may take to return.
	Prompt = 5 * time.Second
)

// Options tells the suite what the provider under test supports and which
// inputs it answers. The zero value runs everything with the defaults.
type Options struct {
	// TextPrompt is a user message the provider answers with text (no tool
	// call) when no tools are offered, as the first message of a thread.
	// Default [DefaultTextPrompt].
	TextPrompt string
	// ToolHistory is a history ending in a user message for which the
	// provider calls at least one of Tools. Default: one user message,
	// [DefaultToolPrompt].
	ToolHistory []events.Message
	// Tools are offered in the round trip. Default: one "calculator" tool
	// taking {"expression": string}.
	Tools []model.Tool
	// ToolResult is the content the suite answers every call with; the
	// provider's text answer after the results must contain it. Default
	// [DefaultToolResult].
	ToolResult string
	// NoToolCalls says the provider never calls tools: the round trip is
	// not run.
	NoToolCalls bool
	// Deterministic says equal requests give equal responses: checked.
	Deterministic bool
	// Parallel is the number of concurrent Generates. Default 8.
	Parallel int
}

func (o Options) withDefaults() Options {
	if o.TextPrompt == "" {
		o.TextPrompt = DefaultTextPrompt
	}
	if o.ToolHistory == nil {
		o.ToolHistory = []events.Message{{Role: events.RoleUser, Content: events.Text(DefaultToolPrompt)}}
	}
	if o.Tools == nil {
		o.Tools = []model.Tool{{
			Name:        "calculator",
			Description: "Evaluates an arithmetic expression.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}`),
		}}
	}
	if o.ToolResult == "" {
		o.ToolResult = DefaultToolResult
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	return o
}

// Run runs the conformance suite. newProvider is called once per subtest.
func Run(t *testing.T, newProvider func(t *testing.T) model.Provider, opts Options) {
	s := suite{o: opts.withDefaults(), newProvider: newProvider}
	t.Run("answers a plain prompt with text and no tool calls", s.plainPrompt)
	t.Run("deltas fold to exactly the response", s.deltasFold)
	if !s.o.NoToolCalls {
		t.Run("calls an offered tool and answers from its result", s.toolRoundTrip)
	}
	t.Run("a cancelled ctx returns ctx.Err() at once", s.cancelledContext)
	t.Run("an expired deadline returns context.DeadlineExceeded", s.expiredDeadline)
	t.Run("cancelling while streaming returns ctx.Err() promptly", s.cancelWhileStreaming)
	t.Run("concurrent Generates on one provider all succeed", s.concurrentGenerates)
	if s.o.Deterministic {
		t.Run("equal requests give equal responses", s.equalRequests)
	}
}

// suite is one run of the conformance suite: its options (defaults
// filled in) and the provider factory; each method is a subtest.
type suite struct {
	o           Options
	newProvider func(t *testing.T) model.Provider
}

// textReq is a request of the text prompt alone.
func (s suite) textReq() model.Request {
	return model.Request{Tenant: "default", Thread: "conformance", Agent: "test",
		Messages: []events.Message{{Role: events.RoleUser, Content: events.Text(s.o.TextPrompt)}}}
}

// toolReq is a request of the tool history with the tools offered.
func (s suite) toolReq() model.Request {
	req := s.textReq()
	req.Messages, req.Tools = clone(s.o.ToolHistory), s.o.Tools
	return req
}

func (s suite) plainPrompt(t *testing.T) {
	resp := generate(t, s.newProvider(t), s.textReq())
	require.False(t, resp.Content.IsNull(), "content is null")
	require.NotEmpty(t, strings.TrimSpace(resp.Content.String()), "content is empty")
	require.Empty(t, resp.ToolCalls)
	requireValidEvent(t, resp)
}

func (s suite) deltasFold(t *testing.T) {
	p := s.newProvider(t)
	resp := generate(t, p, s.textReq())
	require.NotEmpty(t, resp.Content.String())
	if !s.o.NoToolCalls {
		resp := generate(t, p, s.toolReq())
		require.NotEmpty(t, resp.ToolCalls)
	}
}

func (s suite) toolRoundTrip(t *testing.T) {
	p := s.newProvider(t)
	req := s.toolReq()
	resp := generate(t, p, req)
	require.NotEmpty(t, resp.ToolCalls, "the provider made no tool call")
	requireValidEvent(t, resp)
	names := map[string]bool{}
	for _, tl := range s.o.Tools {
		names[tl.Name] = true
	}
	ids := map[string]bool{}
	for i, c := range resp.ToolCalls {
		require.True(t, names[c.Name], "call %d names tool %q, which was not offered", i, c.Name)
		require.NotEmpty(t, c.ID, "call %d has no id", i)
		require.False(t, ids[c.ID], "call %d reuses id %q within the turn", i, c.ID)
		ids[c.ID] = true
		require.True(t, json.Valid([]byte(c.Arguments)), "call %d arguments are not JSON: %q", i, c.Arguments)
	}

	am := resp.AssistantMessage()
	req.Messages = append(req.Messages, events.Message{Role: events.RoleAssistant, Content: am.Content,
		Reasoning: am.Reasoning, ToolCalls: am.ToolCalls, Model: am.Model})
	for _, c := range resp.ToolCalls {
		req.Messages = append(req.Messages, events.Message{Role: events.RoleTool, ToolCallID: c.ID,
			Name: c.Name, Content: events.Text(s.o.ToolResult)})
	}
	final := generate(t, p, req)
	require.Empty(t, final.ToolCalls, "the provider called tools again after getting the results")
	require.False(t, final.Content.IsNull())
	require.Contains(t, final.Content.String(), s.o.ToolResult, "the answer does not use the tool result")
	requireValidEvent(t, final)
}

func (s suite) cancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var deltas atomic.Int32
	err := within(t, func() error {
		_, err := s.newProvider(t).Generate(ctx, s.textReq(), func(model.Delta) { deltas.Add(1) })
		return err
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, deltas.Load(), "deltas were sent after ctx was cancelled")
}

func (s suite) expiredDeadline(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err := within(t, func() error {
		_, err := s.newProvider(t).Generate(ctx, s.textReq(), nil)
		return err
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func (s suite) cancelWhileStreaming(t *testing.T) {
	p := s.newProvider(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		after     atomic.Int32
		cancelled atomic.Bool
	)
	err := within(t, func() error {
		_, err := p.Generate(ctx, s.textReq(), func(model.Delta) {
			if cancelled.Load() {
				after.Add(1)
			}
			cancelled.Store(true)
			cancel()
		})
		return err
	})
	require.True(t, cancelled.Load(), "the provider streamed no delta")
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, after.Load(), "the provider went on streaming after ctx was cancelled")
}

func (s suite) concurrentGenerates(t *testing.T) {
	p := s.newProvider(t)
	var wg sync.WaitGroup
	resps := make([]model.Response, s.o.Parallel)
	errs := make([]error, s.o.Parallel)
	for i := range s.o.Parallel {
		wg.Go(func() {
			req := s.textReq()
			req.Thread = fmt.Sprintf("conformance-%d", i)
			var acc model.Accumulator
			resps[i], errs[i] = p.Generate(context.Background(), req, acc.Add)
			if errs[i] == nil && acc.Content() != resps[i].Content.String() {
				errs[i] = fmt.Errorf("thread %d: deltas give %q, the response %q", i, acc.Content(), resps[i].Content.String())
			}
		})
	}
	wg.Wait()
	for i := range s.o.Parallel {
		require.NoError(t, errs[i], "Generate %d", i)
		require.NotEmpty(t, resps[i].Content.String(), "Generate %d", i)
		if s.o.Deterministic {
			require.Equal(t, resps[0], resps[i], "Generate %d differs from Generate 0", i)
		}
	}
}

func (s suite) equalRequests(t *testing.T) {
	p := s.newProvider(t)
	require.Equal(t, generate(t, p, s.textReq()), generate(t, p, s.textReq()))
	if !s.o.NoToolCalls {
		require.Equal(t, generate(t, p, s.toolReq()), generate(t, p, s.toolReq()))
	}
}

// generate calls Generate and checks the delta contract: deltas fold to the
// response, each delta has exactly one field, onDelta is never called
// concurrently nor after Generate returned.
func generate(t *testing.T, p model.Provider, req model.Request) model.Response {
	t.Helper()
	var (
		acc      model.Accumulator
		inCall   atomic.Int32
		returned atomic.Bool
		problems []string
		mu       sync.Mutex
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	onDelta := func(d model.Delta) {
		if inCall.Add(1) > 1 {
			fail("onDelta was called concurrently")
		}
		defer inCall.Add(-1)
		if returned.Load() {
			fail("onDelta was called after Generate returned")
		}
		n := 0
		if d.Content != "" {
			n++
		}
		if d.Reasoning != "" {
			n++
		}
		if d.ToolCall != nil {
			n++
		}
		if n != 1 {
			fail("delta %+v has %d fields set, want exactly 1", d, n)
		}
		mu.Lock()
		acc.Add(d)
		mu.Unlock()
	}
	resp, err := p.Generate(context.Background(), req, onDelta)
	returned.Store(true)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, problems)
	require.Equal(t, resp.Content.String(), acc.Content(), "content deltas do not concatenate to the content")
	require.Equal(t, resp.Reasoning, acc.Reasoning(), "reasoning deltas do not concatenate to the reasoning")
	require.Equal(t, resp.ToolCalls, acc.ToolCalls(), "tool-call deltas do not fold to the tool calls")
	require.NotEmpty(t, resp.Model, "the response names no model")
	return resp
}

// requireValidEvent checks that resp makes a valid assistant-message event.
func requireValidEvent(t *testing.T, resp model.Response) {
	t.Helper()
	e := events.Event{ID: uuid.Must(uuid.NewV7()).String(), Type: events.TypeAssistantMessage,
		Tenant: events.DefaultTenant, Thread: "conformance", Time: time.Now().UTC(), Producer: "modeltest",
		SchemaVersion: events.SchemaVersion, Payload: resp.AssistantMessage()}
	require.NoError(t, e.Validate())
}

// within runs f and fails the test when it does not return within [Prompt].
func within(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(Prompt):
		t.Fatalf("Generate did not return within %v after ctx was done", Prompt)
		return errors.New("unreachable")
	}
}

func clone(ms []events.Message) []events.Message { return append([]events.Message(nil), ms...) }
