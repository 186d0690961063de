package agentkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/client/agentkit"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/clienttest"
)

func TestCreateThreadPrecedence(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	hook := func(_ context.Context, req agentkit.CreateThreadRequest) (string, error) {
		if req.Input == "fail" {
			return "", errors.New("database down")
		}
		return "from-hook", nil
	}
	_, _, _, err := c.CreateThread(ctx, client.CreateOptions{ThreadID: "existing"})
	require.NoError(t, err)

	cases := []struct {
		name        string
		hook        bool
		req         agentkit.CreateThreadRequest
		wantID      string
		wantSource  agentkit.IDSource
		wantCreated bool
		wantErr     string
	}{
		{name: "an explicit id wins over the createThread hook", hook: true,
			req: agentkit.CreateThreadRequest{ThreadID: "explicit-1"}, wantID: "explicit-1", wantSource: agentkit.IDExplicit, wantCreated: true},
		{name: "the createThread hook picks the id when none is given", hook: true,
			wantID: "from-hook", wantSource: agentkit.IDHook, wantCreated: true},
		{name: "a hook id that already has a thread resumes it", hook: true,
			wantID: "from-hook", wantSource: agentkit.IDHook, wantCreated: false},
		{name: "a UUIDv7 is generated when there is no id and no hook",
			wantSource: agentkit.IDGenerated, wantCreated: true},
		{name: "an explicit id of an existing thread resumes it",
			req: agentkit.CreateThreadRequest{ThreadID: "existing"}, wantID: "existing", wantSource: agentkit.IDExplicit, wantCreated: false},
		{name: "the hook's error is returned", hook: true,
			req: agentkit.CreateThreadRequest{Input: "fail"}, wantErr: "database down"},
		{name: "an id that is not a subject token is refused",
			req: agentkit.CreateThreadRequest{ThreadID: "a.b"}, wantErr: "not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := agentkit.Config{}
			if tc.hook {
				cfg.CreateThread = hook
			}
			h := agentkit.NewHistory(c, cfg)
			ref, err := h.CreateThread(ctx, tc.req)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantSource, ref.Source)
			require.Equal(t, tc.wantCreated, ref.Created)
			if tc.wantID != "" {
				require.Equal(t, tc.wantID, ref.ThreadID)
			} else {
				u, err := uuid.Parse(ref.ThreadID)
				require.NoError(t, err)
				require.Equal(t, uuid.Version(7), u.Version())
			}
			th, err := c.Get(ctx, events.DefaultTenant, ref.ThreadID, client.Consistent())
			require.NoError(t, err)
			require.Equal(t, th.Version, ref.Version)
		})
	}
}

func TestCreatedThreadsHaveRepliesOffUnlessConfigured(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	cases := []struct {
		name string
		cfg  events.ThreadCreated
		want events.ReplyMode
	}{
		{name: "by default agentd workers do not answer", want: events.RepliesOff},
		{name: "replies auto is kept when configured", cfg: events.ThreadCreated{Replies: events.RepliesAuto}, want: events.RepliesAuto},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ref, err := agentkit.NewHistory(c, agentkit.Config{Thread: tc.cfg}).CreateThread(ctx, agentkit.CreateThreadRequest{})
			require.NoError(t, err)
			th, err := c.Get(ctx, ref.Tenant, ref.ThreadID, client.Consistent())
			require.NoError(t, err)
			require.Equal(t, tc.want, th.Replies)
		})
	}
}

// A conversation with a tool loop reads back as one InferenceResult per
// assistant message, with the seed's fields.
func TestGetMapsTheHistoryToInferenceResults(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	sys := "You are a calculator."
	h := agentkit.NewHistory(c, agentkit.Config{Thread: events.ThreadCreated{SystemPrompt: &sys}})
	ref, err := h.CreateThread(ctx, agentkit.CreateThreadRequest{ThreadID: "calc"})
	require.NoError(t, err)

	_, err = h.AppendUserMessage(ctx, ref.ThreadID, agentkit.UserMessage{Content: text("What is 12*(3+4)?")})
	require.NoError(t, err)
	raw := json.RawMessage(`{"id":"resp_1","usage":{"total_tokens":42}}`)
	_, err = h.AppendResults(ctx, ref.ThreadID, []agentkit.InferenceResult{
		{Agent: "calc", Raw: raw,
			Output:    []events.Message{assistant("", "", call("c1", "calculator", `{"expression":"12*(3+4)"}`))},
			ToolCalls: []events.Message{toolResult("c1", "84")}},
		{Agent: "calc", Output: []events.Message{assistant("", "84")}},
	})
	require.NoError(t, err)
	_, err = h.AppendUserMessage(ctx, ref.ThreadID, agentkit.UserMessage{Content: text("And halved?")})
	require.NoError(t, err)
	_, err = h.AppendResults(ctx, ref.ThreadID, []agentkit.InferenceResult{{Agent: "calc", Output: []events.Message{assistant("", "42")}}})
	require.NoError(t, err)

	got, err := h.Get(ctx, ref.ThreadID)
	require.NoError(t, err)
	require.Len(t, got, 3)

	first := got[0]
	require.Equal(t, "calc", first.Agent)
	require.Equal(t, "What is 12*(3+4)?", first.Input)
	require.Equal(t, []string{"system:You are a calculator.", "user:What is 12*(3+4)?"}, contents(first.Prompt))
	require.Equal(t, []string{"user:What is 12*(3+4)?"}, contents(first.History))
	require.Len(t, first.Output, 1)
	require.True(t, first.Output[0].Content.IsNull(), "a tool-call-only turn has null content")
	require.Equal(t, []events.ToolCall{call("c1", "calculator", `{"expression":"12*(3+4)"}`)}, first.Output[0].ToolCalls)
	require.Equal(t, []string{"tool:84"}, contents(first.ToolCalls))
	require.JSONEq(t, string(raw), string(first.Raw))
	require.NotZero(t, first.Seq)
	require.False(t, first.CreatedAt.IsZero())

	second := got[1]
	require.Equal(t, "What is 12*(3+4)?", second.Input, "the second inference of a turn answers the same input")
	require.Equal(t, []string{"user:What is 12*(3+4)?", "assistant:", "tool:84"}, contents(second.History))
	require.Equal(t, []string{"assistant:84"}, contents(second.Output))
	require.Empty(t, second.ToolCalls)
	require.Nil(t, second.Raw)

	third := got[2]
	require.Equal(t, "And halved?", third.Input)
	require.Equal(t, []string{"system:You are a calculator.", "user:And halved?"}, contents(third.Prompt))
	require.Len(t, third.History, 5)
	require.Equal(t, []string{"assistant:42"}, contents(third.Output))
}

func TestGetOfAMissingThreadReturnsNoResults(t *testing.T) {
	h := agentkit.NewHistory(clienttest.New(t).Client, agentkit.Config{})
	got, err := h.Get(context.Background(), "never-created")
	require.NoError(t, err)
	require.Empty(t, got)
}

// Multimodal user content, participant names and metadata survive the
// round trip through the log.
func TestAppendedMessagesReadBackExactly(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	h := agentkit.NewHistory(c, agentkit.Config{})
	ref, err := h.CreateThread(ctx, agentkit.CreateThreadRequest{})
	require.NoError(t, err)
	content := events.Parts(
		events.Part{Type: events.PartText, Text: "What is in this picture?"},
		events.Part{Type: events.PartImage, URL: "https://example.com/cat.png", Detail: "high"},
		events.Part{Type: events.PartImage, Data: "iVBORw0KGgo=", MediaType: "image/png"},
	)
	_, err = h.AppendUserMessage(ctx, ref.ThreadID, agentkit.UserMessage{Content: content, Name: "alice", Metadata: json.RawMessage(`{"ui":"web"}`)})
	require.NoError(t, err)
	out := events.Message{Role: events.RoleAssistant, Content: text("A cat."), Reasoning: "looked at it", Model: "m1",
		Usage: &events.Usage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12}}
	_, err = h.AppendResults(ctx, ref.ThreadID, []agentkit.InferenceResult{{Agent: "vision", Output: []events.Message{out}}})
	require.NoError(t, err)

	got, err := h.Get(ctx, ref.ThreadID)
	require.NoError(t, err)
	require.Len(t, got, 1)
	u := got[0].Prompt[0]
	require.True(t, content.Equal(u.Content))
	require.Equal(t, "alice", u.Name)
	require.JSONEq(t, `{"ui":"web"}`, string(u.Metadata))
	require.Equal(t, "What is in this picture?", got[0].Input)
	o := got[0].Output[0]
	require.Equal(t, "A cat.", o.Content.Text)
	require.Equal(t, "looked at it", o.Reasoning)
	require.Equal(t, "vision", o.Agent)
	require.Equal(t, "m1", o.Model)
	require.Equal(t, out.Usage, o.Usage)
}

// AppendResults places each tool result right after the message that made
// its call, whatever order the result lists them in.
func TestAppendResultsPlacesToolResultsAfterTheirCall(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	h := agentkit.NewHistory(c, agentkit.Config{})
	cases := []struct {
		name    string
		results []agentkit.InferenceResult
		want    []string
	}{
		{name: "results listed in reverse call order follow their message",
			results: []agentkit.InferenceResult{{Agent: "a",
				Output:    []events.Message{assistant("", "", call("x", "t", `{}`), call("y", "t", `{}`))},
				ToolCalls: []events.Message{toolResult("y", "Y"), toolResult("x", "X")}}},
			want: []string{"user:go", "assistant:", "tool:X", "tool:Y"}},
		{name: "a result with two outputs has the call's result between them",
			results: []agentkit.InferenceResult{{Agent: "a",
				Output:    []events.Message{assistant("", "", call("z", "t", `{}`)), assistant("", "done")},
				ToolCalls: []events.Message{toolResult("z", "Z")}}},
			want: []string{"user:go", "assistant:", "tool:Z", "assistant:done"}},
		{name: "a call without a result in the same append is left pending",
			results: []agentkit.InferenceResult{
				{Agent: "a", Output: []events.Message{assistant("", "", call("p", "t", `{}`))}},
			},
			want: []string{"user:go", "assistant:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ref, err := h.CreateThread(ctx, agentkit.CreateThreadRequest{})
			require.NoError(t, err)
			_, err = h.AppendUserMessage(ctx, ref.ThreadID, agentkit.UserMessage{Content: text("go")})
			require.NoError(t, err)
			_, err = h.AppendResults(ctx, ref.ThreadID, tc.results)
			require.NoError(t, err)
			th, err := c.Get(ctx, ref.Tenant, ref.ThreadID, client.Consistent())
			require.NoError(t, err)
			require.Equal(t, tc.want, contents(th.Messages))
		})
	}
	// The pending call of the last case is answered by a later result with
	// no output of its own.
	ref, err := h.CreateThread(ctx, agentkit.CreateThreadRequest{})
	require.NoError(t, err)
	_, err = h.AppendTurn(ctx, ref.ThreadID, agentkit.UserMessage{Content: text("go")},
		[]agentkit.InferenceResult{{Agent: "a", Output: []events.Message{assistant("", "", call("p", "t", `{}`))}}})
	require.NoError(t, err)
	_, err = h.AppendResults(ctx, ref.ThreadID, []agentkit.InferenceResult{{Agent: "a", ToolCalls: []events.Message{toolResult("p", "P")}}})
	require.NoError(t, err)
	got, err := h.Get(ctx, ref.ThreadID)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, []string{"tool:P"}, contents(got[0].ToolCalls))
}

// A turn is stored whole or not at all: a bad tool result in the middle of
// the results leaves the thread as it was.
func TestAppendResultsIsAtomic(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	h := agentkit.NewHistory(c, agentkit.Config{})
	ref, err := h.CreateThread(ctx, agentkit.CreateThreadRequest{})
	require.NoError(t, err)
	v, err := h.AppendUserMessage(ctx, ref.ThreadID, agentkit.UserMessage{Content: text("go")})
	require.NoError(t, err)

	_, err = h.AppendResults(ctx, ref.ThreadID, []agentkit.InferenceResult{
		{Agent: "a", Output: []events.Message{assistant("", "", call("c1", "t", `{}`))}, ToolCalls: []events.Message{toolResult("c1", "ok")}},
		{Agent: "a", ToolCalls: []events.Message{toolResult("never-called", "?")}},
		{Agent: "a", Output: []events.Message{assistant("", "done")}},
	})
	var rej *fold.RejectionError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, fold.CodeNotPending, rej.Code)

	th, err := c.Get(ctx, ref.Tenant, ref.ThreadID, client.Consistent())
	require.NoError(t, err)
	require.Equal(t, v, th.Version, "nothing was stored")
	require.Equal(t, []string{"user:go"}, contents(th.Messages))
}

func TestInvalidResultsAreRefusedBeforeAnythingIsSent(t *testing.T) {
	h := agentkit.NewHistory(clienttest.New(t).Client, agentkit.Config{})
	cases := []struct {
		name   string
		result agentkit.InferenceResult
	}{
		{name: "an output message that is not an assistant message",
			result: agentkit.InferenceResult{Output: []events.Message{user("hi")}}},
		{name: "a tool call entry that is not a tool message",
			result: agentkit.InferenceResult{Output: []events.Message{assistant("", "x")}, ToolCalls: []events.Message{assistant("", "y")}}},
		{name: "raw conflicting with the output's own metadata",
			result: agentkit.InferenceResult{Raw: json.RawMessage(`{"a":1}`),
				Output: []events.Message{{Role: events.RoleAssistant, Content: text("x"), Metadata: json.RawMessage(`{"b":2}`)}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.AppendResults(context.Background(), "unused", []agentkit.InferenceResult{tc.result})
			require.ErrorIs(t, err, agentkit.ErrInvalidResult)
		})
	}
}

// With client.ExpectVersion, a writer whose view is stale gets a conflict
// instead of an interleaved turn.
func TestAppendResultsWithExpectVersionConflicts(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	h := agentkit.NewHistory(c, agentkit.Config{})
	run, err := h.Begin(ctx, agentkit.RunRequest{ThreadID: "occ"})
	require.NoError(t, err)
	v, err := h.AppendUserMessage(ctx, run.ThreadID, agentkit.UserMessage{Content: text("first")}, client.ExpectVersion(run.Version))
	require.NoError(t, err)
	// Another service appends in between.
	_, err = h.AppendResults(ctx, run.ThreadID, []agentkit.InferenceResult{{Agent: "other", Output: []events.Message{assistant("", "from elsewhere")}}})
	require.NoError(t, err)

	_, err = h.AppendResults(ctx, run.ThreadID, []agentkit.InferenceResult{{Agent: "me", Output: []events.Message{assistant("", "stale")}}}, client.ExpectVersion(v))
	var conflict *client.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, v, conflict.Expected)
	require.Greater(t, conflict.Actual, v)
}

func TestAppendTurnStoresTheUserMessageAndResultsTogether(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	h := agentkit.NewHistory(c, agentkit.Config{})
	ref, err := h.CreateThread(ctx, agentkit.CreateThreadRequest{})
	require.NoError(t, err)
	id := events.NewID()
	res, err := h.AppendTurn(ctx, ref.ThreadID, agentkit.UserMessage{ID: id, Content: text("hi")},
		[]agentkit.InferenceResult{{Agent: "a", Output: []events.Message{assistant("", "hello")}}})
	require.NoError(t, err)
	require.Len(t, res.Events, 2)
	require.Equal(t, id, res.Events[0].ID)
	require.Equal(t, res.Events[0].Seq+1, res.Events[1].Seq, "one atomic batch")
	require.Equal(t, id, res.Events[1].Payload.(events.AssistantMessage).ReplyTo)

}

// A retried user message with the same id is stored once.
func TestAppendUserMessageWithTheSameIDIsStoredOnce(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	h := agentkit.NewHistory(c, agentkit.Config{})
	ref, err := h.CreateThread(ctx, agentkit.CreateThreadRequest{})
	require.NoError(t, err)
	msg := agentkit.UserMessage{ID: events.NewID(), Content: text("hi")}
	v1, err := h.AppendUserMessage(ctx, ref.ThreadID, msg)
	require.NoError(t, err)
	v2, err := h.AppendUserMessage(ctx, ref.ThreadID, msg)
	require.NoError(t, err)
	require.Equal(t, v1, v2)
	th, err := c.Get(ctx, ref.Tenant, ref.ThreadID, client.Consistent())
	require.NoError(t, err)
	require.Equal(t, []string{"user:hi"}, contents(th.Messages))
}

func TestBeginSkipsTheReadWhenTheClientProvidesTheHistory(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	_, _, _, err := c.CreateThread(ctx, client.CreateOptions{ThreadID: "known"})
	require.NoError(t, err)
	_, err = c.Append(ctx, events.DefaultTenant, "known", []events.Event{{Payload: events.UserMessage{Content: text("stored")}}}, client.AnyVersion())
	require.NoError(t, err)
	provided := []agentkit.InferenceResult{{Agent: "ui", Input: "from the browser", Output: []events.Message{assistant("ui", "cached")}}}

	cases := []struct {
		name        string
		hook        bool
		req         agentkit.RunRequest
		wantReads   int64
		wantFrom    agentkit.HistorySource
		wantSource  agentkit.IDSource
		wantCreated bool
		wantResults []agentkit.InferenceResult
	}{
		{name: "client-provided history on an explicit thread is returned without a read",
			req: agentkit.RunRequest{ThreadID: "known", Results: provided}, wantReads: 0,
			wantFrom: agentkit.FromClient, wantSource: agentkit.IDExplicit, wantResults: provided},
		{name: "an empty but provided history is not read either",
			req: agentkit.RunRequest{ThreadID: "known", Results: []agentkit.InferenceResult{}}, wantReads: 0,
			wantFrom: agentkit.FromClient, wantSource: agentkit.IDExplicit, wantResults: []agentkit.InferenceResult{}},
		{name: "an explicit thread without provided history is read from the log",
			req: agentkit.RunRequest{ThreadID: "known"}, wantReads: 1,
			wantFrom: agentkit.FromLog, wantSource: agentkit.IDExplicit, wantResults: []agentkit.InferenceResult{}},
		{name: "a missing explicit thread is read once and created",
			req: agentkit.RunRequest{ThreadID: "brand-new"}, wantReads: 1,
			wantFrom: agentkit.NewThread, wantSource: agentkit.IDExplicit, wantCreated: true, wantResults: []agentkit.InferenceResult{}},
		{name: "a new thread from the hook is not read", hook: true,
			req: agentkit.RunRequest{Input: "hello"}, wantReads: 0,
			wantFrom: agentkit.NewThread, wantSource: agentkit.IDHook, wantCreated: true, wantResults: []agentkit.InferenceResult{}},
		{name: "a new generated thread keeps the provided history without a read",
			req: agentkit.RunRequest{Results: provided}, wantReads: 0,
			wantFrom: agentkit.FromClient, wantSource: agentkit.IDGenerated, wantCreated: true, wantResults: provided},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := &countingLog{Log: c}
			cfg := agentkit.Config{}
			if tc.hook {
				cfg.CreateThread = func(context.Context, agentkit.CreateThreadRequest) (string, error) {
					return "hooked-" + string(rune('a'+i)), nil
				}
			}
			run, err := agentkit.NewHistory(log, cfg).Begin(ctx, tc.req)
			require.NoError(t, err)
			require.Equal(t, tc.wantReads, log.gets.Load())
			require.Equal(t, tc.wantFrom, run.HistoryFrom)
			require.Equal(t, tc.wantSource, run.Source)
			require.Equal(t, tc.wantCreated, run.Created)
			require.Equal(t, tc.wantResults, run.Results)
		})
	}
}

// The explicit id of an existing thread resumes it: Begin's results and
// version are the thread's.
func TestBeginResumesAnExplicitThread(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	h := agentkit.NewHistory(c, agentkit.Config{})
	first, err := h.Begin(ctx, agentkit.RunRequest{ThreadID: "resume-me"})
	require.NoError(t, err)
	require.True(t, first.Created)
	res, err := h.AppendTurn(ctx, first.ThreadID, agentkit.UserMessage{Content: text("hi")},
		[]agentkit.InferenceResult{{Agent: "a", Output: []events.Message{assistant("", "hello")}}}, client.ExpectVersion(first.Version))
	require.NoError(t, err)

	again, err := h.Begin(ctx, agentkit.RunRequest{ThreadID: "resume-me"})
	require.NoError(t, err)
	require.False(t, again.Created)
	require.Equal(t, agentkit.FromLog, again.HistoryFrom)
	require.Equal(t, res.Version, again.Version)
	require.Len(t, again.Results, 1)
	require.Equal(t, "hi", again.Results[0].Input)
}
