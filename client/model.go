package client

import (
	"encoding/json"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// Thread is a thread as [Client.Get] returns it: the client's read model of
// the thread's projected state. It is built from the fold's state
// (package fold) but is a type of its own, so that the fold's internals and
// the snapshot store's format can change without changing this API. JSON
// field names are those of the HTTP API's thread body.
//
// A Thread is a value the caller owns, except that its Messages share
// what they point to (string bytes, content parts, tool calls) with the
// client's caches: do not modify a message in place.
type Thread struct {
	Tenant string `json:"tenant"`
	Thread string `json:"thread"`
	// Version is the stream sequence of the thread's last event (applied or
	// rejected): what writers pass for optimistic concurrency.
	Version uint64 `json:"version"`
	// EventCount is how many events were folded (applied or rejected).
	EventCount uint64 `json:"-"`

	// Exists is true once a thread.created or thread.forked was applied.
	Exists  bool `json:"exists"`
	Deleted bool `json:"deleted,omitempty"`
	Erased  bool `json:"erased,omitempty"`

	Owner         string               `json:"owner,omitempty"`
	Agent         string               `json:"agent,omitempty"`
	SystemPrompt  *string              `json:"system_prompt,omitempty"`
	Title         string               `json:"title,omitempty"`
	Metadata      map[string]string    `json:"metadata,omitempty"`
	Replies       events.ReplyMode     `json:"replies,omitempty"`
	PendingPolicy events.PendingPolicy `json:"pending_policy,omitempty"`
	ForkedFrom    *ForkRef             `json:"forked_from,omitempty"`
	// ExternalID is the framework id the thread was created under when it
	// was not a thread id itself (events.ThreadIDFor maps it to Thread);
	// "" otherwise.
	ExternalID string `json:"external_id,omitempty"`
	// Lifetime counts the earlier lifetimes of this thread id (a create on
	// a soft-deleted thread starts a new one); LifetimeSeq is the sequence
	// of the event that started the current one (0 in the first lifetime).
	// Earlier lifetimes stay in
	// the log: read them with AtSeq below LifetimeSeq, or as events.
	Lifetime    int    `json:"lifetime,omitempty"`
	LifetimeSeq uint64 `json:"lifetime_seq,omitempty"`

	// CreatedAt and UpdatedAt are the event times (UTC) of the thread's
	// first and last applied event.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	// Generation counts history replacements (reset, restore, compaction).
	Generation uint64 `json:"generation"`
	// Base is the number of history messages before Messages[0]: 0 for
	// every read but a windowed one.
	Base int `json:"base"`
	// Messages is the history, valid input for the OpenAI and Anthropic
	// chat APIs apart from tool calls still pending at its end.
	Messages []events.Message `json:"messages"`
	// Pending are the tool calls not answered yet, in call order.
	Pending []PendingCall `json:"pending,omitempty"`
	// KV is the thread's key-value state (AgentKit state.kv).
	KV map[string]json.RawMessage `json:"kv,omitempty"`
	// AgentTurns counts assistant messages per agent name ("" for none).
	AgentTurns map[string]int `json:"agent_turns,omitempty"`
	// LastUser is the last user message still in the history, and
	// LastUserAnswered whether an assistant message followed it.
	LastUser         *MessageRef `json:"last_user,omitempty"`
	LastUserAnswered bool        `json:"last_user_answered,omitempty"`

	// RejectedCount counts the thread's rejected events; Rejections keeps
	// the newest of them (at most fold.MaxRejectionsKept).
	RejectedCount uint64      `json:"rejected_count,omitempty"`
	Rejections    []Rejection `json:"rejections,omitempty"`

	// Redactions lists the thread's redacted events (Client.Redact), in
	// the order they were redacted: those events read with the named
	// fields replaced by events.RedactedText.
	Redactions []fold.Redaction `json:"redactions,omitempty"`

	// Events are the thread's stored events in order, when requested
	// ([WithEvents]).
	Events []events.Stored `json:"events,omitempty"`
	// FromSnapshot is true when the answer came from the projector's
	// snapshot without reading the stream (not consistent mode).
	FromSnapshot bool `json:"-"`

	state *fold.State // what the read model was built from, for its rules
}

// PendingCall is a tool call awaiting its result: its id and tool name,
// and the stream sequence and event id of the assistant message that made
// it.
type PendingCall struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Seq     uint64 `json:"seq"`
	EventID string `json:"event_id"`
}

// MessageRef points at the event of a message.
type MessageRef struct {
	EventID string `json:"event_id"`
	Seq     uint64 `json:"seq"`
}

// ForkRef names the thread and sequence a thread was forked from.
type ForkRef struct {
	Tenant string `json:"tenant"`
	Thread string `json:"thread"`
	Seq    uint64 `json:"seq"`
	// ByReference: the fork inherited its history from the source at
	// read time (events.Forked.ByReference), not as a copy.
	ByReference bool `json:"by_reference,omitempty"`
	// SourceErased: a fork by reference whose source was erased: it
	// inherits nothing.
	SourceErased bool `json:"source_erased,omitempty"`
}

// Rejection records one event the fold skipped (docs/design.md invariant 6):
// its sequence, event id and type (empty when it did not decode), the
// fold's code (fold.Code values, e.g. "tool_call_not_pending") and reason.
type Rejection struct {
	Seq     uint64      `json:"seq"`
	EventID string      `json:"event_id,omitempty"`
	Type    events.Type `json:"type,omitempty"`
	Reason  string      `json:"reason"`
	Code    fold.Code   `json:"code"`
}

// MessageCount is the number of messages in the whole history.
func (t *Thread) MessageCount() int { return t.Base + len(t.Messages) }

// WaitingForAgent reports whether the thread waits for its agent (the
// fold's rule, fold.State.WaitingForAgent): it exists, is neither deleted
// nor erased, has replies on, no tool call is pending, and its last
// message is a user message or a tool result.
func (t *Thread) WaitingForAgent() bool { return t.state != nil && t.state.WaitingForAgent() }

// ThreadOf returns the read model of a fold state (nil for nil). The
// Thread shares s's slices and maps: do not modify s afterwards.
func ThreadOf(s *fold.State) *Thread {
	if s == nil {
		return nil
	}
	t := &Thread{
		Tenant: s.Tenant, Thread: s.Thread, Version: s.Version, EventCount: s.Events,
		Exists: s.Exists, Deleted: s.Deleted, Erased: s.Erased,
		Owner: s.Owner, Agent: s.Agent, SystemPrompt: s.SystemPrompt, Title: s.Title, Metadata: s.Metadata,
		Replies: s.Replies, PendingPolicy: s.PendingPolicy, ForkedFrom: forkRefOf(s.ForkedFrom),
		ExternalID: s.ExternalID, Lifetime: s.Lifetime, LifetimeSeq: s.LifetimeSeq,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, Generation: s.Generation, Base: s.Base,
		Messages: s.Messages, KV: s.KV, AgentTurns: s.AgentTurns, LastUserAnswered: s.LastUserAnswered,
		RejectedCount: s.RejectedCount, state: s,
	}
	if s.Pending != nil {
		t.Pending = make([]PendingCall, len(s.Pending))
		for i, p := range s.Pending {
			t.Pending[i] = PendingCall(p)
		}
	}
	if s.LastUser != nil {
		t.LastUser = &MessageRef{EventID: s.LastUser.EventID, Seq: s.LastUser.Seq}
	}
	if s.Redactions != nil {
		t.Redactions = append([]fold.Redaction(nil), s.Redactions...)
	}
	if s.Rejections != nil {
		t.Rejections = make([]Rejection, len(s.Rejections))
		for i, r := range s.Rejections {
			t.Rejections[i] = Rejection(r)
		}
	}
	return t
}

func forkRefOf(f *fold.ForkRef) *ForkRef {
	if f == nil {
		return nil
	}
	return &ForkRef{Tenant: f.Tenant, Thread: f.Thread, Seq: f.Seq, ByReference: f.ByReference, SourceErased: f.SourceErased}
}

// FoldState returns a private copy (fold.State.Clone) of the fold state the
// read model was built from, for code that folds more events onto it, as
// the framework adapters do to follow a thread; nil for a Thread not
// returned by the client.
func (t *Thread) FoldState() *fold.State {
	if t.state == nil {
		return nil
	}
	return t.state.Clone()
}
