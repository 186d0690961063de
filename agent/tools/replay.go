package tools

import (
	"context"
	"fmt"

	"github.com/convlog/convlog/agent/internal/recording"
	"github.com/convlog/convlog/events"
)

// Replay is a [Runner] that answers each call with the tool result
// recorded in a conversation.
//
// It finds the call by position, not by id alone (recorded threads reuse
// ids): [Env.History] must follow the recording (the matching rule of the
// replay model in agent/model: roles, user text, assistant text and calls,
// result call ids; system messages ignored). The call's assistant turn is
// either the next recorded message after the history, or the history's
// last assistant message when it holds this call still unanswered (the
// worker appended the turn before running its tools). The result is the
// recorded tool message with the call's id among the tool messages right
// after that turn; its content is returned as recorded (null stays null),
// with IsError false.
//
// Failures are error results: a history that left the recording (saying
// where), no recorded turn making this call, no recorded result for it, a
// done ctx. Replay is immutable and safe for concurrent use.
type Replay struct {
	rec *recording.Recording
}

var _ Runner = (*Replay)(nil)

// NewReplay returns a runner for conv. It returns an error naming the
// message when a recorded message cannot be converted.
func NewReplay(conv events.Conversation) (*Replay, error) {
	rec, err := recording.New(conv)
	if err != nil {
		return nil, fmt.Errorf("tools: replay: %w", err)
	}
	return &Replay{rec: rec}, nil
}

// Run implements [Runner].
func (r *Replay) Run(ctx context.Context, call events.ToolCall, env Env) events.ToolResult {
	res := events.ToolResult{ToolCallID: call.ID, Name: call.Name}
	fail := func(format string, args ...any) events.ToolResult {
		res.IsError = true
		res.Content = events.Text(fmt.Sprintf("replay of recording %q: ", r.rec.ID) + fmt.Sprintf(format, args...))
		return res
	}
	if err := ctx.Err(); err != nil {
		return fail("tool %q was cancelled: %v", call.Name, err)
	}
	h := env.History
	if _, err := r.rec.Match(h); err != nil {
		return fail("the history diverged: %v", err)
	}
	// Is the call's turn already in the history, still unanswered?
	j := len(h)
	for j > 0 && h[j-1].Role == events.RoleTool {
		j--
	}
	var pos int
	if j > 0 && h[j-1].Role == events.RoleAssistant && hasCall(h[j-1], call.ID) && !answered(h[j:], call.ID) {
		n, _ := r.rec.Match(h[:j]) // a prefix of a matching history matches
		pos = n - 1
	} else {
		pos, _ = r.rec.Match(h)
	}
	if pos >= len(r.rec.Messages) || r.rec.Messages[pos].Role != events.RoleAssistant || !hasCall(r.rec.Messages[pos], call.ID) {
		return fail("no recorded assistant turn makes call %q (%s) %s", call.ID, call.Name, r.at(pos))
	}
	for _, c := range r.rec.Messages[pos].ToolCalls {
		if c.ID == call.ID && c.Name != call.Name {
			return fail("recorded call %q is to %q, not %q", call.ID, c.Name, call.Name)
		}
	}
	for k := pos + 1; k < len(r.rec.Messages) && r.rec.Messages[k].Role == events.RoleTool; k++ {
		if m := r.rec.Messages[k]; m.ToolCallID == call.ID {
			res.Content = m.Content
			return res
		}
	}
	return fail("no recorded result for call %q (%s) after the turn %s", call.ID, call.Name, r.at(pos))
}

// at names recording position pos for errors.
func (r *Replay) at(pos int) string {
	if i := r.rec.OriginalIndex(pos); i >= 0 {
		return fmt.Sprintf("at message %d", i)
	}
	return "at the end of the recording"
}

func hasCall(m events.Message, id string) bool {
	for _, c := range m.ToolCalls {
		if c.ID == id {
			return true
		}
	}
	return false
}

func answered(results []events.Message, id string) bool {
	for _, m := range results {
		if m.ToolCallID == id {
			return true
		}
	}
	return false
}
