package model

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/convlog/convlog/events"
)

// Tool names the offline model calls. They are the names of the built-in
// tools of agent/tools.
const (
	ToolClock      = "clock"
	ToolCalculator = "calculator"
	ToolKVGet      = "kv_get"
	ToolKVSet      = "kv_set"
)

// DefaultOfflineModel is the model name the offline provider reports.
const DefaultOfflineModel = "convlog-offline"

// OfflineConfig configures [Offline]. The zero value works.
type OfflineConfig struct {
	// Model is the model name reported in responses when the request names
	// none. Default [DefaultOfflineModel].
	Model string
	// TokenDelay is a pause between streamed pieces, for demos that want to
	// show streaming at human speed. Default 0: no pause. The pause ends
	// early when ctx is done.
	TokenDelay time.Duration
}

// DefaultOfflineConfig returns the configuration the zero value stands for.
func DefaultOfflineConfig() OfflineConfig {
	return OfflineConfig{Model: DefaultOfflineModel}
}

// Validate reports every problem with c.
func (c OfflineConfig) Validate() error {
	return validateStreamed("offline", c.Model, c.TokenDelay)
}

// Offline is a deterministic model that needs no network and no key. The
// same request always gives the same response; the text holds no wall-clock
// time (only the clock tool's result, when it answers with it).
//
// What it does, looking at the end of the history:
//
//   - The last message is a tool result (or an assistant turn whose calls
//     are unanswered): it answers in text from the results of the last
//     assistant turn's calls, e.g. "The current time is 2026-01-02T03:04:05Z.",
//     "12*(3+4) = 84.", "Noted: my name is Ada.", "my name is Ada.", or
//     "The calculator tool failed: ..." for an error result. It never calls
//     tools twice in a row, so a worker's loop ends.
//   - The last message is a user message: its text is split into clauses at
//     '?', '!', ';', newlines and sentence-ending '.', and each clause may
//     become one tool call, checked in this order:
//     "use NAME" (also "call NAME", "run the NAME tool") calls the offered
//     tool NAME with {}, whatever it is (so a client's own tools, passed
//     through the chat endpoint, can be called deterministically);
//     "remember X is Y" (also "remember that X are Y", "X = Y") calls kv_set
//     with {"key": x, "value": "Y"}; a question about the time or date
//     ("what time is it") calls clock with {}; arithmetic such as
//     "what is 12*(3+4)" calls calculator with {"expression": "12*(3+4)"};
//     "what is X" / "who is X" calls kv_get with {"key": x}. Keys are X
//     lower-cased with spaces collapsed and surrounding quotes and
//     punctuation removed. A tool is called only if the request offers it.
//     Several clauses give several calls in one turn. The turn's reasoning
//     says why each call is made; call ids are "call_<n>_<i>" with n the
//     number of history messages and i the call's index.
//   - Otherwise (no tool applies): an echo reply, `You said: "...". This
//     thread has N messages: ...`, with a hint listing what to try when it is
//     the thread's first user message and tools are offered.
//   - The last message is an assistant text turn (a worker does not ask
//     then): as for the last user message.
//   - A history without a user message gets a greeting.
//
// The reasoning, then the content, is streamed word by word through
// onDelta, then each tool call as two fragments (id and name, then the
// arguments). Usage counts words: input is the words of the system
// prompt and history, output the streamed words and argument strings.
//
// Offline is safe for concurrent use and keeps no state between calls.
type Offline struct {
	cfg OfflineConfig
}

var _ Provider = (*Offline)(nil)

// NewOffline returns an offline provider. It returns the errors of
// [OfflineConfig.Validate].
func NewOffline(cfg OfflineConfig) (*Offline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Model == "" {
		cfg.Model = DefaultOfflineModel
	}
	return &Offline{cfg: cfg}, nil
}

// Generate implements [Provider]. It fails only when ctx is done, with
// ctx.Err().
func (o *Offline) Generate(ctx context.Context, req Request, onDelta func(Delta)) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	resp := offlineReply(req)
	resp.Model = o.cfg.Model
	if req.Model != "" {
		resp.Model = req.Model
	}
	e := emitter{ctx: ctx, onDelta: onDelta, delay: o.cfg.TokenDelay}
	if err := e.response(resp); err != nil {
		return Response{}, err
	}
	return resp, nil
}

// offlineReply computes the deterministic turn for req (without Model).
func offlineReply(req Request) Response {
	msgs := req.Messages
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != events.RoleSystem {
			last = i
			break
		}
	}
	var r Response
	switch {
	case last < 0:
		r.Content = events.Text(greeting(req.Tools))
	case msgs[last].Role == events.RoleTool,
		msgs[last].Role == events.RoleAssistant && len(msgs[last].ToolCalls) > 0:
		r.Content = events.Text(answerResults(msgs[:last+1]))
	case lastUser(msgs) < 0:
		r.Content = events.Text(greeting(req.Tools))
	default:
		u := lastUser(msgs)
		calls, why := userIntents(msgs[u].Content.String(), offered(req.Tools))
		if len(calls) > 0 {
			for i, c := range calls {
				c.ID = fmt.Sprintf("call_%d_%d", len(msgs), i)
				r.ToolCalls = append(r.ToolCalls, c)
			}
			r.Reasoning = strings.Join(why, " ")
		} else {
			r.Content = events.Text(echo(msgs, u, req.Tools))
		}
	}
	r.FinishReason = "stop"
	if len(r.ToolCalls) > 0 {
		r.FinishReason = "tool_calls"
	}
	r.Usage = offlineUsage(req, r)
	return r
}

func lastUser(msgs []events.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == events.RoleUser {
			return i
		}
	}
	return -1
}

func offered(ts []Tool) map[string]bool {
	m := make(map[string]bool, len(ts))
	for _, t := range ts {
		m[t.Name] = true
	}
	return m
}

func offlineUsage(req Request, r Response) *events.Usage {
	in := len(words(req.SystemPrompt))
	for _, m := range req.Messages {
		in += len(words(m.Content.String()))
		for _, c := range m.ToolCalls {
			in += len(words(c.Arguments))
		}
	}
	out := len(words(r.Reasoning)) + len(words(r.Content.String()))
	for _, c := range r.ToolCalls {
		out += len(words(c.Arguments))
	}
	return &events.Usage{InputTokens: int64(in), OutputTokens: int64(out), TotalTokens: int64(in + out)}
}

func greeting(tools []Tool) string {
	s := "Hello! I am the offline model of convlog."
	if h := hint(tools); h != "" {
		s += " " + h
	}
	return s
}

// hint lists example prompts for the offered tools, "" when none applies.
func hint(tools []Tool) string {
	has := offered(tools)
	var ex []string
	if has[ToolClock] {
		ex = append(ex, `"what time is it?"`)
	}
	if has[ToolCalculator] {
		ex = append(ex, `"what is 12*(3+4)?"`)
	}
	if has[ToolKVSet] {
		ex = append(ex, `"remember my name is Ada"`)
	}
	if has[ToolKVGet] {
		ex = append(ex, `"what is my name?"`)
	}
	if len(ex) == 0 {
		return ""
	}
	if len(ex) > 1 {
		ex[len(ex)-1] = "or " + ex[len(ex)-1]
	}
	sep := ", "
	if len(ex) == 2 {
		sep = " "
	}
	return "Try " + strings.Join(ex, sep) + "."
}

// echo is the reply to a user message no tool applies to.
func echo(msgs []events.Message, u int, tools []Tool) string {
	var users, assistants, results, total int
	for _, m := range msgs {
		switch m.Role {
		case events.RoleUser:
			users++
		case events.RoleAssistant:
			assistants++
		case events.RoleTool:
			results++
		default:
			continue
		}
		total++
	}
	var b strings.Builder
	text := strings.TrimSpace(msgs[u].Content.String())
	if text == "" {
		b.WriteString("You sent no text.")
	} else {
		fmt.Fprintf(&b, "You said: %q.", truncateRunes(text, 200))
	}
	if n := attachments(msgs[u].Content); n > 0 {
		fmt.Fprintf(&b, " You attached %s.", plural(n, "file", "files"))
	}
	fmt.Fprintf(&b, " This thread has %s: %d from you, %d from me and %s.",
		plural(total, "message", "messages"), users, assistants, plural(results, "tool result", "tool results"))
	if users == 1 {
		if h := hint(tools); h != "" {
			b.WriteString(" " + h)
		}
	}
	return b.String()
}

func attachments(c events.Content) int {
	n := 0
	for _, p := range c.Parts {
		if p.Type != events.PartText {
			n++
		}
	}
	return n
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
