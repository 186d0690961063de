package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// answer collects an agent's answer to one user message from a watch of
// the thread: the durable assistant messages whose ReplyTo is that message
// (one per step; the last has no tool calls), the tool results between
// them, and, when streaming, the live deltas of the steps being generated.
type answer struct {
	s       *Server
	t       *chatTurn
	plan    turnPlan
	id      string
	created int64

	steps   []events.AssistantMessage
	results []events.ToolResult
	version uint64
	final   bool

	// Streaming state.
	out          *chatOut
	live         map[int]*liveStep // by step number relative to plan.base
	nextCall     int
	wroteContent bool
}

// liveStep is what was streamed of one step.
type liveStep struct {
	content, reasoning strings.Builder
	calls              map[int]*liveCall
	done               bool
	// first is the step's first delta. Deltas carry no generation id, and
	// two workers may generate the same step at once (the loser's append
	// conflicts): when the first delta comes again, a second generation is
	// interleaving, and live pieces of the step stop; the stored message
	// supplies the rest.
	first     *events.Delta
	contended bool
}

type liveCall struct {
	global int
	id     string
	args   strings.Builder
}

// errSuperseded and errInterrupted end a wait whose answer will not come.
var (
	errSuperseded  = errors.New("superseded")
	errInterrupted = errors.New("interrupted")
)

// next handles one update; done is true once the final step arrived.
func (a *answer) next(u client.Update) error {
	switch {
	case u.Delta != nil:
		if u.Delta.ReplyTo == a.plan.replyTo && a.out != nil {
			return a.onDelta(*u.Delta)
		}
	case u.Event != nil && u.Err == nil:
		ev := u.Event
		a.version = ev.Seq
		switch p := ev.Payload.(type) {
		case events.AssistantMessage:
			if p.ReplyTo == a.plan.replyTo {
				return a.onStep(p)
			}
		case events.ToolResult:
			if len(a.steps) > 0 {
				a.results = append(a.results, p)
			}
		case events.UserMessage:
			if ev.Seq > a.plan.replySeq && ev.ID != a.plan.replyTo {
				return fmt.Errorf("%w: a newer user message (seq %d) arrived before the answer; the agent answers the latest message", errSuperseded, ev.Seq)
			}
		case events.Reset, events.Restore, events.Deleted, events.Erased:
			if ev.Seq > a.plan.replySeq {
				return fmt.Errorf("%w: the thread was changed by %s at seq %d before the answer", errInterrupted, ev.Type, ev.Seq)
			}
		}
	}
	return nil
}

// wait consumes the watch until the final step, ctx's end or a failure.
func (a *answer) wait(ctx context.Context, wt *client.Watcher, beat <-chan time.Time, onBeat func() error) error {
	for !a.final {
		select {
		case <-ctx.Done():
			return a.ctxErr(ctx)
		case <-beat:
			if err := onBeat(); err != nil {
				return err
			}
		case u, ok := <-wt.C:
			if !ok {
				if err := wt.Err(); err != nil {
					return fmt.Errorf("httpapi: watching thread %s: %w", a.t.thread, err)
				}
				return a.ctxErr(ctx)
			}
			if err := a.next(u); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *answer) ctxErr(ctx context.Context) error {
	switch {
	case a.s.base.Err() != nil:
		return newProblem(http.StatusServiceUnavailable, "shutting-down", "Server shutting down",
			fmt.Sprintf("the server is shutting down; the answer will be stored in thread %s: repeat the request to get it", a.t.thread)).thread(a.t.thread)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return newProblem(http.StatusGatewayTimeout, "answer-timeout", "Answer timeout",
			fmt.Sprintf("agent %q did not answer within %s; the answer will be stored in thread %s: repeat the same request to get it", a.t.model, a.s.cfg.AnswerTimeout, a.t.thread)).thread(a.t.thread)
	}
	return ctx.Err()
}

// collect waits for the whole answer (non-streaming).
func (a *answer) collect(ctx context.Context, wt *client.Watcher) error {
	err := a.wait(ctx, wt, nil, nil)
	return a.mapErr(err)
}

func (a *answer) mapErr(err error) error {
	switch {
	case errors.Is(err, errSuperseded):
		return chatProblem(http.StatusConflict, "superseded", "Turn superseded", err.Error(), a.t.thread)
	case errors.Is(err, errInterrupted):
		return chatProblem(http.StatusConflict, "interrupted", "Turn interrupted", err.Error(), a.t.thread)
	}
	return err
}

func (a *answer) onStep(m events.AssistantMessage) error {
	step := len(a.steps)
	a.steps = append(a.steps, m)
	if len(m.ToolCalls) == 0 {
		a.final = true
	}
	if a.out == nil {
		return nil
	}
	ls := a.liveStep(step)
	ls.done = true
	// Stream what the deltas did not carry (dropped deltas, or a step that
	// was generated before the watch started).
	if full, sent := m.Reasoning, ls.reasoning.String(); strings.HasPrefix(full, sent) && len(full) > len(sent) {
		if err := a.out.send(chunkDelta{ReasoningContent: full[len(sent):]}, nil); err != nil {
			return err
		}
	}
	full, sent := m.Content.String(), ls.content.String()
	switch {
	case strings.HasPrefix(full, sent):
		if err := a.emitContent(ls, full[len(sent):]); err != nil {
			return err
		}
	default:
		a.s.log.Warn("streamed content differs from the stored answer", "tenant", a.t.tenant, "thread", a.t.thread, "step", step)
	}
	for i, c := range m.ToolCalls {
		lc := ls.calls[i]
		if lc == nil {
			lc = &liveCall{global: a.nextCall, id: c.ID}
			a.nextCall++
			ls.calls[i] = lc
			if err := a.out.send(chunkDelta{ToolCalls: []chunkToolCall{{Index: lc.global, ID: c.ID, Type: "function",
				Function: chunkFunction{Name: c.Name, Arguments: c.Arguments}}}}, nil); err != nil {
				return err
			}
			continue
		}
		if sent := lc.args.String(); strings.HasPrefix(c.Arguments, sent) && len(c.Arguments) > len(sent) {
			if err := a.out.send(chunkDelta{ToolCalls: []chunkToolCall{{Index: lc.global,
				Function: chunkFunction{Arguments: c.Arguments[len(sent):]}}}}, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *answer) liveStep(step int) *liveStep {
	if a.live == nil {
		a.live = map[int]*liveStep{}
	}
	ls := a.live[step]
	if ls == nil {
		ls = &liveStep{calls: map[int]*liveCall{}}
		a.live[step] = ls
	}
	return ls
}

// emitContent streams a piece of a step's content; a step's first piece
// after earlier steps' content is preceded by a blank line, as in the
// non-streamed answer.
func (a *answer) emitContent(ls *liveStep, piece string) error {
	if piece == "" {
		return nil
	}
	out := piece
	if ls.content.Len() == 0 && a.wroteContent {
		out = "\n\n" + piece
	}
	ls.content.WriteString(piece)
	a.wroteContent = true
	return a.out.send(chunkDelta{Content: &out}, nil)
}

func (a *answer) onDelta(d events.Delta) error {
	step := d.Step - a.plan.base
	if step < len(a.steps) {
		return nil // the stored step was already streamed
	}
	ls := a.liveStep(step)
	if ls.done {
		return nil // a generation restarted after a conflict: the stored step settles it
	}
	if d.Done {
		ls.done = true
		return nil
	}
	switch {
	case ls.contended:
		return nil
	case ls.first == nil:
		f := d
		ls.first = &f
	case sameDelta(*ls.first, d):
		ls.contended = true
		a.s.log.Debug("two generations of one step interleave; streaming the stored step instead",
			"tenant", a.t.tenant, "thread", a.t.thread, "step", d.Step)
		return nil
	}
	if d.Reasoning != "" {
		ls.reasoning.WriteString(d.Reasoning)
		if err := a.out.send(chunkDelta{ReasoningContent: d.Reasoning}, nil); err != nil {
			return err
		}
	}
	if d.Content != "" {
		if err := a.emitContent(ls, d.Content); err != nil {
			return err
		}
	}
	if tc := d.ToolCall; tc != nil {
		lc := ls.calls[tc.Index]
		c := chunkToolCall{Function: chunkFunction{Arguments: tc.Arguments}}
		if lc == nil {
			lc = &liveCall{global: a.nextCall, id: tc.ID}
			a.nextCall++
			ls.calls[tc.Index] = lc
			c.ID, c.Type, c.Function.Name = tc.ID, "function", tc.Name
		}
		c.Index = lc.global
		lc.args.WriteString(tc.Arguments)
		if err := a.out.send(chunkDelta{ToolCalls: []chunkToolCall{c}}, nil); err != nil {
			return err
		}
	}
	return nil
}

func sameDelta(a, b events.Delta) bool {
	if a.Content != b.Content || a.Reasoning != b.Reasoning || (a.ToolCall == nil) != (b.ToolCall == nil) {
		return false
	}
	return a.ToolCall == nil || *a.ToolCall == *b.ToolCall
}

// text is the answer's content: the non-empty step contents joined by a
// blank line (what the stream sends).
func (a *answer) text() (content, reasoning string) {
	var cs, rs []string
	for _, m := range a.steps {
		if t := m.Content.String(); t != "" {
			cs = append(cs, t)
		}
		if m.Reasoning != "" {
			rs = append(rs, m.Reasoning)
		}
	}
	return strings.Join(cs, "\n\n"), strings.Join(rs, "")
}

func (a *answer) usage() *chatUsage {
	var u chatUsage
	known := false
	for _, m := range a.steps {
		if m.Usage != nil {
			known = true
			u.PromptTokens += m.Usage.InputTokens
			u.CompletionTokens += m.Usage.OutputTokens
		}
	}
	if !known {
		return nil
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return &u
}

func (a *answer) info() convlogInfo {
	ci := convlogInfo{Thread: a.t.thread, ConversationKey: a.t.key.Key, Tier: int(a.t.key.Tier),
		TierName: a.t.key.Tier.String(), Stateless: a.t.key.Stateless(), Version: a.version,
		ReplyTo: a.plan.replyTo, Replayed: a.plan.mode == "replay" || a.plan.mode == "wait"}
	res := map[string]events.ToolResult{}
	for _, r := range a.results {
		res[r.ToolCallID] = r
	}
	for _, m := range a.steps {
		for _, c := range m.ToolCalls {
			ec := executedCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
			if r, ok := res[c.ID]; ok {
				ec.Result, ec.IsError = r.Content.String(), r.IsError
			}
			ci.ToolCalls = append(ci.ToolCalls, ec)
		}
	}
	return ci
}

// completion is the non-streamed answer. The message holds the answer's
// text only: the tool calls were run by the agent, not to be run by the
// client; they are listed in the "convlog" extension member.
func (a *answer) completion() chatCompletion {
	content, reasoning := a.text()
	model := a.t.model
	return chatCompletion{ID: a.id, Object: "chat.completion", Created: a.created, Model: model,
		Choices: []completionChoice{{Index: 0, FinishReason: "stop",
			Message: completionMessage{Role: "assistant", Content: &content, ReasoningContent: reasoning}}},
		Usage: a.usage(), Convlog: a.info()}
}

// stream answers in the OpenAI SSE chunk format: a role chunk, content,
// reasoning and tool-call deltas as the agent generates, a finish chunk,
// an optional usage chunk, then [DONE]. Failures after the start are sent
// as {"error": {...}} (the OpenAI SDKs raise it).
func (a *answer) stream(ctx context.Context, w http.ResponseWriter, r *http.Request, wt *client.Watcher) error {
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
		err = a.wait(ctx, wt, beat.C, func() error { return a.out.sw.write([]byte(": keep-alive\n")) })
	}
	if err == nil {
		stop := "stop"
		err = a.out.send(chunkDelta{}, &stop)
	}
	if err == nil && a.t.includeUsage {
		if u := a.usage(); u != nil {
			err = a.out.write(chatChunk{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.t.model,
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
	p := problemFor(a.mapErr(err), errCtx{thread: a.t.thread})
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
	c := chatChunk{ID: o.a.id, Object: "chat.completion.chunk", Created: o.a.created, Model: o.a.t.model,
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
		o.a.s.streamEnded(err, StreamDrop{Route: "POST /v1/chat/completions", Tenant: o.a.t.tenant, Thread: o.a.t.thread})
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
		Role             string  `json:"role"`
		Content          *string `json:"content"`
		ReasoningContent string  `json:"reasoning_content,omitempty"`
		Refusal          *string `json:"refusal"`
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
	chunkDelta struct {
		Role             string          `json:"role,omitempty"`
		Content          *string         `json:"content,omitempty"`
		ReasoningContent string          `json:"reasoning_content,omitempty"`
		ToolCalls        []chunkToolCall `json:"tool_calls,omitempty"`
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
