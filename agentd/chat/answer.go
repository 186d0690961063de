package chat

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// Answer collects an agent's answer to one user message from a watch of
// the thread: the durable assistant messages whose ReplyTo is that message
// (one per step; the last has no tool calls), the tool results between
// them, and, when streaming ([Answer.Stream]), the live deltas of the
// steps being generated. An Answer belongs to one goroutine.
type Answer struct {
	s      *Service
	t      *Turn
	thread string
	plan   plan
	wt     *client.Watcher

	steps   []events.AssistantMessage
	results []events.ToolResult
	version uint64
	final   bool
	// clientTools names the turn's client tools; clientCalls are the calls
	// of them the answer ended with.
	clientTools map[string]bool
	clientCalls []events.ToolCall

	// Streaming state.
	emit         func(Piece) error
	live         map[int]*liveStep // by step number relative to plan.base
	nextCall     int
	wroteContent bool
}

// Piece is one piece of a streamed answer, in the order a client shows
// it: content text, reasoning text, or a piece of a tool call. Exactly one
// of Content, Reasoning and ToolCall is set.
type Piece struct {
	// Content is the next piece of the answer's text. A step's first
	// piece after earlier steps' content starts with a blank line ("\n\n"),
	// as in [Answer.Text].
	Content *string
	// Reasoning is the next piece of the reasoning text.
	Reasoning string
	// ToolCall is the next piece of a tool call the agent makes (and runs
	// itself).
	ToolCall *ToolCallPiece
}

// ToolCallPiece is a piece of one tool call: the first piece of a call has
// New set with its ID and Name; later ones add to its Arguments. Index
// numbers the calls of the whole answer from 0, across steps. Client is
// true for a call of one of the turn's client tools (the client must run
// it); the others are run by the agent's worker.
type ToolCallPiece struct {
	Index     int
	New       bool
	ID, Name  string
	Arguments string
	Client    bool
}

// ExecutedCall is a tool call the agent made during the answer, with the
// result it got (Result is empty while none is stored).
type ExecutedCall struct {
	ID, Name, Arguments string
	Result              string
	IsError             bool
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
	client bool
	args   strings.Builder
}

// Thread is the conversation's thread id.
func (a *Answer) Thread() string { return a.thread }

// ReplyTo is the event id of the user message being answered.
func (a *Answer) ReplyTo() string { return a.plan.replyTo }

// Replayed is true when the turn appended nothing: a retry of a turn whose
// answer is (or will be) stored already.
func (a *Answer) Replayed() bool { return a.plan.mode == modeReplay || a.plan.mode == modeWait }

// Version is the thread version of the last event the answer saw.
func (a *Answer) Version() uint64 { return a.version }

// Steps are the answer's assistant messages so far, one per step.
func (a *Answer) Steps() []events.AssistantMessage { return a.steps }

// Stream makes [Answer.Wait] hand the answer to emit piece by piece as the
// agent generates it (live deltas, then whatever the stored steps hold
// that the deltas did not carry). Call it before Wait. An error from emit
// ends Wait with that error.
func (a *Answer) Stream(emit func(Piece) error) { a.emit = emit }

// Stop stops watching the thread. Safe to call more than once.
func (a *Answer) Stop() { a.wt.Stop() }

// Wait follows the thread until the final step of the answer (nil), the
// end of ctx (ctx's error), or a failure: *[Error] with
// [CodeSuperseded] or [CodeInterrupted] when the answer will not come, a
// watch error, or emit's error. While it waits, each tick of beat (nil:
// none) calls onBeat, whose error ends the wait.
func (a *Answer) Wait(ctx context.Context, beat <-chan time.Time, onBeat func() error) error {
	for !a.final {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-beat:
			if err := onBeat(); err != nil {
				return err
			}
		case u, ok := <-a.wt.C:
			if !ok {
				if err := a.wt.Err(); err != nil {
					return fmt.Errorf("chat: watching thread %s: %w", a.thread, err)
				}
				return ctx.Err()
			}
			if err := a.next(u); err != nil {
				return err
			}
		}
	}
	return nil
}

// next handles one update.
func (a *Answer) next(u client.Update) error {
	switch {
	case u.Delta != nil:
		if u.Delta.ReplyTo == a.plan.replyTo && a.emit != nil {
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
				return newError(CodeSuperseded, a.thread, fmt.Sprintf("superseded: a newer user message (seq %d) arrived before the answer; the agent answers the latest message", ev.Seq))
			}
		case events.Reset, events.Restore, events.Deleted, events.Erased:
			if ev.Seq > a.plan.replySeq {
				return newError(CodeInterrupted, a.thread, fmt.Sprintf("interrupted: the thread was changed by %s at seq %d before the answer", ev.Type, ev.Seq))
			}
		}
	}
	return nil
}

func (a *Answer) onStep(m events.AssistantMessage) error {
	step := len(a.steps)
	a.steps = append(a.steps, m)
	if len(m.ToolCalls) == 0 {
		a.final = true
	}
	for _, c := range m.ToolCalls {
		if a.clientTools[c.Name] {
			// The client runs it: the answer ends here, with the call.
			a.clientCalls = append(a.clientCalls, c)
			a.final = true
		}
	}
	if a.emit == nil {
		return nil
	}
	ls := a.liveStep(step)
	ls.done = true
	// Stream what the deltas did not carry (dropped deltas, or a step that
	// was generated before the watch started).
	if full, sent := m.Reasoning, ls.reasoning.String(); strings.HasPrefix(full, sent) && len(full) > len(sent) {
		if err := a.emit(Piece{Reasoning: full[len(sent):]}); err != nil {
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
		a.s.log.Warn("streamed content differs from the stored answer", "tenant", a.t.Tenant, "thread", a.thread, "step", step)
	}
	for i, c := range m.ToolCalls {
		lc := ls.calls[i]
		if lc == nil {
			lc = &liveCall{global: a.nextCall, id: c.ID, client: a.clientTools[c.Name]}
			a.nextCall++
			ls.calls[i] = lc
			if err := a.emit(Piece{ToolCall: &ToolCallPiece{Index: lc.global, New: true, ID: c.ID, Name: c.Name, Arguments: c.Arguments, Client: lc.client}}); err != nil {
				return err
			}
			continue
		}
		if sent := lc.args.String(); strings.HasPrefix(c.Arguments, sent) && len(c.Arguments) > len(sent) {
			if err := a.emit(Piece{ToolCall: &ToolCallPiece{Index: lc.global, Arguments: c.Arguments[len(sent):], Client: lc.client}}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *Answer) liveStep(step int) *liveStep {
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
func (a *Answer) emitContent(ls *liveStep, piece string) error {
	if piece == "" {
		return nil
	}
	out := piece
	if ls.content.Len() == 0 && a.wroteContent {
		out = "\n\n" + piece
	}
	ls.content.WriteString(piece)
	a.wroteContent = true
	return a.emit(Piece{Content: &out})
}

func (a *Answer) onDelta(d events.Delta) error {
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
			"tenant", a.t.Tenant, "thread", a.thread, "step", d.Step)
		return nil
	}
	if d.Reasoning != "" {
		ls.reasoning.WriteString(d.Reasoning)
		if err := a.emit(Piece{Reasoning: d.Reasoning}); err != nil {
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
		c := ToolCallPiece{Arguments: tc.Arguments}
		if lc == nil {
			lc = &liveCall{global: a.nextCall, id: tc.ID, client: a.clientTools[tc.Name]}
			a.nextCall++
			ls.calls[tc.Index] = lc
			c.New, c.ID, c.Name = true, tc.ID, tc.Name
		}
		c.Index, c.Client = lc.global, lc.client
		lc.args.WriteString(tc.Arguments)
		if err := a.emit(Piece{ToolCall: &c}); err != nil {
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

// Text is the answer's content: the non-empty step contents joined by a
// blank line (what the stream sends), and its reasoning, concatenated.
func (a *Answer) Text() (content, reasoning string) {
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

// Usage sums the token usage of the answer's steps (input and output
// tokens as the model reported them); known is false when no step
// reported any.
func (a *Answer) Usage() (input, output int64, known bool) {
	for _, m := range a.steps {
		if m.Usage != nil {
			known = true
			input += m.Usage.InputTokens
			output += m.Usage.OutputTokens
		}
	}
	return input, output, known
}

// ClientCalls are the calls of the turn's client tools the answer ended
// with (none when it ended with a final text): the client runs them and
// sends their results in its next request.
func (a *Answer) ClientCalls() []events.ToolCall { return a.clientCalls }

// Calls are the tool calls the agent's worker ran during the answer, in
// order, with their results when stored (client tool calls are in
// [Answer.ClientCalls]).
func (a *Answer) Calls() []ExecutedCall {
	res := map[string]events.ToolResult{}
	for _, r := range a.results {
		res[r.ToolCallID] = r
	}
	var out []ExecutedCall
	for _, m := range a.steps {
		for _, c := range m.ToolCalls {
			if a.clientTools[c.Name] {
				continue
			}
			ec := ExecutedCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
			if r, ok := res[c.ID]; ok {
				ec.Result, ec.IsError = r.Content.String(), r.IsError
			}
			out = append(out, ec)
		}
	}
	return out
}
