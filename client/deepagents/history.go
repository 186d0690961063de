package deepagents

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// Validate reports whether messages is a history a [Checkpointer] stores:
// nil, or an error wrapping [ErrInvalidHistory] that names the first bad
// message. A history is valid when
//   - each message has a role (user, assistant, tool, system) and only the
//     fields that role stores (user: Content, Name, Metadata; assistant:
//     Content, Reasoning, ToolCalls, Agent, Model, Usage, Name, Metadata;
//     tool: ToolCallID, Name, Content, IsError; system: Content, Name,
//     Metadata), so that it round-trips exactly;
//   - a user message has content and an assistant message has content,
//     reasoning or tool calls;
//   - content parts, tool calls and metadata are well formed
//     (events.Validate);
//   - each tool message answers a call pending at that point, and no user,
//     assistant or system message comes while calls are pending (the
//     history is valid input for chat APIs, docs/design.md invariant 5). Calls
//     may be pending at the end (a run interrupted for human approval).
//
// The log fields (Seq, EventID, Time, Synthetic) are ignored.
func Validate(messages []events.Message) error {
	for i, m := range messages {
		if err := checkFields(m); err != nil {
			return fmt.Errorf("%w: message %d (%s): %s", ErrInvalidHistory, i, m.Role, err)
		}
	}
	// The fold's verdict on the history, as a thread.restored would get it.
	ms := make([]events.Message, len(messages))
	for i, m := range messages {
		ms[i] = clean(m)
	}
	now := time.Now().UTC()
	s := fold.NewState(events.DefaultTenant, "deepagents-validate")
	ev := func(seq uint64, p events.Payload) events.Stored {
		return events.Stored{Seq: seq, Event: events.Event{ID: events.NewID(), Type: p.EventType(), Tenant: s.Tenant,
			Thread: s.Thread, Time: now, Producer: "deepagents", SchemaVersion: events.SchemaVersion, Payload: p}}
	}
	if err := fold.Apply(s, ev(1, events.ThreadCreated{})); err != nil {
		return err
	}
	if err := fold.Apply(s, ev(2, events.Restore{Messages: ms})); err != nil {
		var rej *fold.RejectionError
		var inv *events.ValidationError
		switch {
		case errors.As(err, &rej):
			return fmt.Errorf("%w: %s", ErrInvalidHistory, rej.Reason)
		case errors.As(err, &inv):
			return fmt.Errorf("%w: %s: %s", ErrInvalidHistory, inv.Field, inv.Reason)
		}
		return fmt.Errorf("%w: %v", ErrInvalidHistory, err)
	}
	return nil
}

// roleFields are the message fields that only some roles store, in the
// order checkFields names them, each with the roles that store it.
var roleFields = []struct {
	name  string
	set   func(events.Message) bool
	roles []events.Role
}{
	{"reasoning", func(m events.Message) bool { return m.Reasoning != "" }, []events.Role{events.RoleAssistant}},
	{"tool_calls", func(m events.Message) bool { return len(m.ToolCalls) > 0 }, []events.Role{events.RoleAssistant}},
	{"tool_call_id", func(m events.Message) bool { return m.ToolCallID != "" }, []events.Role{events.RoleTool}},
	{"is_error", func(m events.Message) bool { return m.IsError }, []events.Role{events.RoleTool}},
	{"agent", func(m events.Message) bool { return m.Agent != "" }, []events.Role{events.RoleAssistant}},
	{"model", func(m events.Message) bool { return m.Model != "" }, []events.Role{events.RoleAssistant}},
	{"usage", func(m events.Message) bool { return m.Usage != nil }, []events.Role{events.RoleAssistant}},
	{"metadata", func(m events.Message) bool { return len(m.Metadata) > 0 },
		[]events.Role{events.RoleUser, events.RoleAssistant, events.RoleSystem}},
}

// checkFields checks that m has what its role needs and only the fields
// its role stores ([roleFields]).
func checkFields(m events.Message) error {
	switch m.Role {
	case events.RoleUser:
		if m.Content.IsNull() {
			return errors.New("a user message needs content")
		}
	case events.RoleAssistant:
		if m.Content.IsNull() && len(m.ToolCalls) == 0 && m.Reasoning == "" {
			return errors.New("an assistant message needs content, reasoning or tool calls")
		}
	case events.RoleTool:
		if m.ToolCallID == "" {
			return errors.New("a tool message needs tool_call_id")
		}
	case events.RoleSystem:
	default:
		return fmt.Errorf("role must be user, assistant, tool or system, got %q", m.Role)
	}
	var extra []string
	for _, f := range roleFields {
		if f.set(m) && !slices.Contains(f.roles, m.Role) {
			extra = append(extra, f.name)
		}
	}
	if len(extra) > 0 {
		return fmt.Errorf("%v not stored for this role", extra)
	}
	return nil
}

// clean returns a deep copy of m without its log fields, in the canonical
// form both implementations return (empty tool calls and metadata nil).
func clean(m events.Message) events.Message {
	m.Seq, m.EventID, m.Time, m.Synthetic = 0, "", time.Time{}, false
	if len(m.ToolCalls) == 0 {
		m.ToolCalls = nil
	} else {
		m.ToolCalls = slices.Clone(m.ToolCalls)
	}
	if len(m.Metadata) == 0 {
		m.Metadata = nil
	} else {
		m.Metadata = bytes.Clone(m.Metadata)
	}
	if m.Usage != nil {
		u := *m.Usage
		m.Usage = &u
	}
	if m.Content.Kind == events.ContentParts {
		m.Content.Parts = append([]events.Part{}, m.Content.Parts...)
	}
	return m
}

func cleanAll(ms []events.Message) []events.Message {
	out := make([]events.Message, len(ms))
	for i, m := range ms {
		out[i] = clean(m)
	}
	return out
}

// same reports whether a and b are the same message, log fields aside.
func same(a, b events.Message) bool {
	return a.Role == b.Role && a.Content.Equal(b.Content) && a.Name == b.Name && a.Reasoning == b.Reasoning &&
		slices.Equal(a.ToolCalls, b.ToolCalls) && a.ToolCallID == b.ToolCallID && a.IsError == b.IsError &&
		a.Agent == b.Agent && a.Model == b.Model && sameUsage(a.Usage, b.Usage) && bytes.Equal(a.Metadata, b.Metadata)
}

func sameUsage(a, b *events.Usage) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// hasPrefix reports whether ms starts with prefix.
func hasPrefix(ms, prefix []events.Message) bool {
	if len(prefix) > len(ms) {
		return false
	}
	for i := range prefix {
		if !same(ms[i], prefix[i]) {
			return false
		}
	}
	return true
}

func hasSystem(ms []events.Message) bool {
	return slices.ContainsFunc(ms, func(m events.Message) bool { return m.Role == events.RoleSystem })
}

// isSummary reports whether m can be a compaction's summary: a user or
// assistant message with content and nothing else.
func isSummary(m events.Message) bool {
	return (m.Role == events.RoleUser || m.Role == events.RoleAssistant) && !m.Content.IsNull() &&
		same(m, events.Message{Role: m.Role, Content: m.Content})
}

// Plan kinds: what a Save records.
const (
	planNothing = iota // the history is already next
	planAppend         // next extends the stored history: append the suffix
	planReset          // next is empty: thread.reset
	planCompact        // summary + a suffix of the stored history (+ new messages): thread.compacted + appends
	planRestore        // anything else: thread.restored
)

// plan is what Save records for a history change.
type plan struct {
	kind int
	// upToSeq and summary of a compaction.
	upToSeq uint64
	summary events.Message
	// tail are the messages appended (after the compaction, if any).
	tail []events.Message
}

// planSave decides how to turn the stored history (the thread's projected
// state, nil for a thread that does not exist) into next. The rule, first
// match wins:
//
//  1. next equals the stored history: nothing.
//  2. The stored history is a prefix of next, and the new messages hold
//     no system message (system messages have no message event): append
//     the new messages.
//  3. next is empty: a thread.reset.
//  4. next[0] is a summary (a user or assistant message with content
//     only) and next[1:] starts with stored[k:] for some 1 <= k <
//     len(stored), where the cut before stored[k] is one the fold can make
//     (stored[k] is not a tool result, stored[k-1] and stored[k] come from
//     different events, no pending call is cut off) and the messages after
//     the kept suffix hold no system message: a thread.compacted
//     replacing stored[:k] by the summary (up_to_seq = stored[k-1].Seq),
//     followed by the new messages. The smallest such k (the longest kept
//     suffix) is used.
//  5. Otherwise: a thread.restored with next.
func planSave(s *fold.State, next []events.Message) plan {
	var stored []events.Message
	if s != nil {
		stored = s.Messages
	}
	if len(stored) == len(next) && hasPrefix(next, stored) {
		return plan{kind: planNothing}
	}
	if hasPrefix(next, stored) && !hasSystem(next[len(stored):]) {
		return plan{kind: planAppend, tail: next[len(stored):]}
	}
	if len(next) == 0 {
		return plan{kind: planReset}
	}
	if p, ok := planCompaction(s, next); ok {
		return p
	}
	return plan{kind: planRestore}
}

func planCompaction(s *fold.State, next []events.Message) (plan, bool) {
	if s == nil || s.Base != 0 || len(next) < 2 || !isSummary(next[0]) {
		return plan{}, false
	}
	stored, rest := s.Messages, next[1:]
	for k := 1; k < len(stored); k++ {
		kept := stored[k:]
		if len(kept) > len(rest) || !same(kept[0], rest[0]) {
			continue
		}
		cut := stored[k-1].Seq
		if kept[0].Role == events.RoleTool || cut >= kept[0].Seq || cut == 0 {
			continue
		}
		if slices.ContainsFunc(s.Pending, func(p fold.PendingCall) bool { return p.Seq <= cut }) {
			continue
		}
		if !hasPrefix(rest, kept) || hasSystem(rest[len(kept):]) {
			continue
		}
		return plan{kind: planCompact, upToSeq: cut, summary: next[0], tail: rest[len(kept):]}, true
	}
	return plan{}, false
}

// events returns the events of p for next (the history being saved).
func (p plan) events(next []events.Message) []events.Event {
	var evs []events.Event
	switch p.kind {
	case planReset:
		evs = append(evs, events.Event{Payload: events.Reset{Reason: "deepagents: save of an empty history"}})
	case planRestore:
		evs = append(evs, events.Event{Payload: events.Restore{Messages: cleanAll(next),
			Reason: "deepagents: save of a rewritten history"}})
	case planCompact:
		evs = append(evs, events.Event{Payload: events.Compaction{UpToSeq: p.upToSeq, Summary: p.summary.Content, Role: p.summary.Role}})
	}
	for _, m := range p.tail {
		evs = append(evs, events.Event{Payload: clean(m).Payload()})
	}
	return evs
}
