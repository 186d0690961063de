package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/convlog/convlog/agentd/chat"
)

// answer renders one chat turn's answer (chat.Answer) in the OpenAI
// formats: a chat.completion object, or a stream of chunks.
type answer struct {
	s       *Server
	t       *chatTurn
	ans     *chat.Answer
	id      string
	created int64
	out     *chatOut // when streaming
	// callIndex maps a streamed call's index in the whole answer
	// (chat.ToolCallPiece.Index) to its index in the delta member that
	// carries it; clientCalls and agentCalls count the calls of each.
	callIndex               map[int]int
	clientCalls, agentCalls int
}

// ctxErr maps the end of a wait by ctx to a problem: the server shutting
// down (503) or the answer timeout (504); err otherwise.
func (a *answer) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	switch {
	case a.s.base.Err() != nil:
		return newProblem(http.StatusServiceUnavailable, "shutting-down", "Server shutting down",
			fmt.Sprintf("the server is shutting down; the answer will be stored in thread %s: repeat the request to get it", a.t.thread)).thread(a.t.thread)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return newProblem(http.StatusGatewayTimeout, "answer-timeout", "Answer timeout",
			fmt.Sprintf("agent %q did not answer within %s; the answer will be stored in thread %s: repeat the same request to get it", a.t.Agent, a.s.cfg.AnswerTimeout, a.t.thread)).thread(a.t.thread)
	}
	return ctx.Err()
}

func (a *answer) usage() *chatUsage {
	in, out, known := a.ans.Usage()
	if !known {
		return nil
	}
	return &chatUsage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out}
}

func (a *answer) info() convlogInfo {
	ci := convlogInfo{Thread: a.t.thread, ConversationKey: a.t.Key.Key, Tier: int(a.t.Key.Tier),
		TierName: a.t.Key.Tier.String(), Stateless: a.t.Key.Stateless(), Version: a.ans.Version(),
		ReplyTo: a.ans.ReplyTo(), Replayed: a.ans.Replayed()}
	for _, c := range a.ans.Calls() {
		ci.ToolCalls = append(ci.ToolCalls, executedCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Result: c.Result, IsError: c.IsError})
	}
	return ci
}

// chunkOf is the OpenAI chunk delta of a piece of the answer. A tool
// call's index counts only the calls of the member it is in: the client's
// calls (delta.tool_calls) from 0, and the agent's (convlog_tool_calls)
// from 0. The OpenAI SDKs accumulate delta.tool_calls into an array by
// index, so an index past the client's calls would leave a hole in it.
func (a *answer) chunkOf(p chat.Piece) chunkDelta {
	switch {
	case p.Content != nil:
		return chunkDelta{Content: p.Content}
	case p.ToolCall != nil:
		tc := p.ToolCall
		c := chunkToolCall{Index: a.memberIndex(tc), Function: chunkFunction{Arguments: tc.Arguments}}
		if tc.New {
			c.ID, c.Type, c.Function.Name = tc.ID, "function", tc.Name
		}
		if tc.Client {
			return chunkDelta{ToolCalls: []chunkToolCall{c}}
		}
		return chunkDelta{ConvlogToolCalls: []chunkToolCall{c}}
	}
	return chunkDelta{ReasoningContent: p.Reasoning}
}

// memberIndex is the index of tc in its delta member, given on the call's
// first piece.
func (a *answer) memberIndex(tc *chat.ToolCallPiece) int {
	if i, ok := a.callIndex[tc.Index]; ok {
		return i
	}
	if a.callIndex == nil {
		a.callIndex = map[int]int{}
	}
	n := &a.agentCalls
	if tc.Client {
		n = &a.clientCalls
	}
	a.callIndex[tc.Index] = *n
	*n++
	return a.callIndex[tc.Index]
}

// completion is the non-streamed answer. The message holds the answer's
// text and the calls of the client's tools it ended with; the calls the
// agent ran are not the client's to run and are listed in the "convlog"
// extension member only.
func (a *answer) completion() chatCompletion {
	content, reasoning := a.ans.Text()
	model := a.t.Agent
	msg := completionMessage{Role: "assistant", Content: &content, ReasoningContent: reasoning}
	finish := a.finishReason()
	for _, c := range a.ans.ClientCalls() {
		msg.ToolCalls = append(msg.ToolCalls, completionToolCall{ID: c.ID, Type: "function",
			Function: chunkFunction{Name: c.Name, Arguments: c.Arguments}})
	}
	if len(msg.ToolCalls) > 0 && content == "" {
		msg.Content = nil
	}
	return chatCompletion{ID: a.id, Object: "chat.completion", Created: a.created, Model: model,
		Choices: []completionChoice{{Index: 0, FinishReason: finish, Message: msg}},
		Usage:   a.usage(), Convlog: a.info()}
}

// finishReason is "tool_calls" when the answer ends with calls of the
// client's tools (the client runs them and sends the results), else
// "stop".
func (a *answer) finishReason() string {
	if len(a.ans.ClientCalls()) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// stream answers in the OpenAI SSE chunk format: a role chunk, content,
// reasoning and tool-call deltas as the agent generates, a finish chunk,
// an optional usage chunk, then [DONE]. Failures after the start are sent
// as {"error": {...}} (the OpenAI SDKs raise it).
func (a *answer) stream(ctx context.Context, w http.ResponseWriter) error {
	setStreamHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	a.out = &chatOut{a: a, sw: &sseWriter{w: w, rc: http.NewResponseController(w), timeout: a.s.cfg.WriteTimeout}}
	empty := ""
	err := a.out.send(chunkDelta{Role: "assistant", Content: &empty}, nil)
	if err == nil {
		beat := time.NewTicker(a.s.cfg.Heartbeat)
		defer beat.Stop()
		// A comment line without a blank line: some OpenAI SDK decoders
		// (openai-go) dispatch an event on every blank line, data or not.
		a.ans.Stream(func(p chat.Piece) error { return a.out.send(a.chunkOf(p), nil) })
		err = a.ans.Wait(ctx, beat.C, func() error { return a.out.sw.write([]byte(": keep-alive\n")) })
	}
	if err == nil {
		finish := a.finishReason()
		err = a.out.send(chunkDelta{}, &finish)
	}
	if err == nil && a.t.includeUsage {
		if u := a.usage(); u != nil {
			err = a.out.write(chatChunk{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.t.Agent,
				Choices: []chunkChoice{}, Usage: u})
		}
	}
	if err == nil {
		err = a.out.sw.write([]byte("data: [DONE]\n\n"))
	}
	if err == nil {
		return nil
	}
	if a.out.dropped {
		return nil
	}
	p := problemFor(a.s.chatErr(a.ctxErr(ctx, err), a.t), errCtx{thread: a.t.thread})
	b, _ := json.Marshal(struct {
		Error *OpenAIError `json:"error"`
	}{openAIErrorOf(p)})
	_ = a.out.sw.write(append(append([]byte("data: "), b...), '\n', '\n'))
	return err
}

// chatOut writes chunks of one streamed completion.
type chatOut struct {
	a       *answer
	sw      *sseWriter
	dropped bool
}

func (o *chatOut) send(d chunkDelta, finish *string) error {
	c := chatChunk{ID: o.a.id, Object: "chat.completion.chunk", Created: o.a.created, Model: o.a.t.Agent,
		Choices: []chunkChoice{{Index: 0, Delta: d, FinishReason: finish}}}
	if finish != nil {
		ci := o.a.info()
		c.Convlog = &ci
	}
	return o.write(c)
}

func (o *chatOut) write(c chatChunk) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := o.sw.write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
		o.dropped = true
		o.a.s.streamEnded(err, StreamDrop{Route: "POST /v1/chat/completions", Tenant: o.a.t.Tenant, Thread: o.a.t.thread})
		return err
	}
	return nil
}

// OpenAI wire types (the subset this API writes).
type (
	chatCompletion struct {
		ID      string             `json:"id"`
		Object  string             `json:"object"`
		Created int64              `json:"created"`
		Model   string             `json:"model"`
		Choices []completionChoice `json:"choices"`
		Usage   *chatUsage         `json:"usage,omitempty"`
		Convlog convlogInfo        `json:"convlog"`
	}
	completionChoice struct {
		Index        int               `json:"index"`
		Message      completionMessage `json:"message"`
		FinishReason string            `json:"finish_reason"`
		Logprobs     *struct{}         `json:"logprobs"`
	}
	completionMessage struct {
		Role             string               `json:"role"`
		Content          *string              `json:"content"`
		ReasoningContent string               `json:"reasoning_content,omitempty"`
		Refusal          *string              `json:"refusal"`
		ToolCalls        []completionToolCall `json:"tool_calls,omitempty"`
	}
	// completionToolCall is a call of one of the client's tools.
	completionToolCall struct {
		ID       string        `json:"id"`
		Type     string        `json:"type"`
		Function chunkFunction `json:"function"`
	}
	chatUsage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	}
	chatChunk struct {
		ID      string        `json:"id"`
		Object  string        `json:"object"`
		Created int64         `json:"created"`
		Model   string        `json:"model"`
		Choices []chunkChoice `json:"choices"`
		Usage   *chatUsage    `json:"usage,omitempty"`
		Convlog *convlogInfo  `json:"convlog,omitempty"`
	}
	chunkChoice struct {
		Index        int        `json:"index"`
		Delta        chunkDelta `json:"delta"`
		FinishReason *string    `json:"finish_reason"`
		Logprobs     *struct{}  `json:"logprobs"`
	}
	// chunkDelta is a chunk's delta. ToolCalls is for calls of the
	// client's tools, which the client runs; ConvlogToolCalls is the
	// extension member that streams the calls the agent runs itself,
	// which OpenAI SDKs ignore (in ToolCalls, the SDKs would run them a
	// second time). Each member numbers its own calls from 0.
	chunkDelta struct {
		Role             string          `json:"role,omitempty"`
		Content          *string         `json:"content,omitempty"`
		ReasoningContent string          `json:"reasoning_content,omitempty"`
		ToolCalls        []chunkToolCall `json:"tool_calls,omitempty"`
		ConvlogToolCalls []chunkToolCall `json:"convlog_tool_calls,omitempty"`
	}
	chunkToolCall struct {
		Index    int           `json:"index"`
		ID       string        `json:"id,omitempty"`
		Type     string        `json:"type,omitempty"`
		Function chunkFunction `json:"function"`
	}
	chunkFunction struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
	// convlogInfo is the "convlog" extension member of completions: which
	// thread and conversation key the turn used, and the tool calls the
	// agent ran.
	convlogInfo struct {
		Thread          string         `json:"thread"`
		ConversationKey string         `json:"conversation_key"`
		Tier            int            `json:"tier"`
		TierName        string         `json:"tier_name"`
		Stateless       bool           `json:"stateless"`
		Version         uint64         `json:"version"`
		ReplyTo         string         `json:"reply_to"`
		Replayed        bool           `json:"replayed,omitempty"`
		ToolCalls       []executedCall `json:"tool_calls,omitempty"`
	}
	executedCall struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Result    string `json:"result,omitempty"`
		IsError   bool   `json:"is_error,omitempty"`
	}
)
