package fold

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/convlog/convlog/events"
)

// MaxRejectionsKept is how many of the most recent rejections a [State]
// keeps in Rejections; RejectedCount counts all of them.
const MaxRejectionsKept = 100

// State is the projection of one thread: what readers get. It is produced
// only by the fold ([Apply]) and is deterministic: the same events always
// give the same State (docs/design.md invariant 8).
//
// Messages may be a window: the projector keeps long histories in immutable
// KV chunks and folds with only the newest messages in memory. Base is the
// number of history messages before Messages[0]; MessageCount = Base +
// len(Messages). Readers of a full snapshot get Base == 0.
type State struct {
	Tenant string `msgpack:"tenant" json:"tenant"`
	Thread string `msgpack:"thread" json:"thread"`
	// Version is the stream sequence of the last event folded (applied or
	// rejected): the thread version writers pass for optimistic concurrency.
	Version uint64 `msgpack:"version" json:"version"`
	// Events is how many events were folded (applied or rejected).
	Events uint64 `msgpack:"events" json:"events"`

	// Exists is true once a thread.created or thread.forked was applied.
	Exists  bool `msgpack:"exists" json:"exists"`
	Deleted bool `msgpack:"deleted,omitempty" json:"deleted,omitempty"`
	Erased  bool `msgpack:"erased,omitempty" json:"erased,omitempty"`

	Owner         string               `msgpack:"owner,omitempty" json:"owner,omitempty"`
	Agent         string               `msgpack:"agent,omitempty" json:"agent,omitempty"`
	SystemPrompt  *string              `msgpack:"system_prompt,omitempty" json:"system_prompt,omitempty"`
	Title         string               `msgpack:"title,omitempty" json:"title,omitempty"`
	Metadata      map[string]string    `msgpack:"metadata,omitempty" json:"metadata,omitempty"`
	Replies       events.ReplyMode     `msgpack:"replies,omitempty" json:"replies,omitempty"`
	PendingPolicy events.PendingPolicy `msgpack:"pending_policy,omitempty" json:"pending_policy,omitempty"`
	ForkedFrom    *ForkRef             `msgpack:"forked_from,omitempty" json:"forked_from,omitempty"`
	// ExternalID is the framework's id the thread was created under when
	// that was not a thread id itself (events.ThreadCreated.ExternalID).
	ExternalID string `msgpack:"external_id,omitempty" json:"external_id,omitempty"`
	// Lifetime counts the earlier lifetimes of the thread id: a
	// thread.created (or thread.forked) on a soft-deleted thread starts a
	// new one. LifetimeSeq is the sequence of the event that started the
	// current lifetime (0 in the first: it starts at the thread's first
	// event); the events before it are the earlier lifetimes', still in the
	// log (audit reads them at their sequences). Both are omitted while 0,
	// so snapshots of threads with one lifetime keep their bytes.
	Lifetime    int    `msgpack:"lifetime,omitempty" json:"lifetime,omitempty"`
	LifetimeSeq uint64 `msgpack:"lifetime_seq,omitempty" json:"lifetime_seq,omitempty"`

	CreatedAt time.Time `msgpack:"created_at" json:"created_at"`
	UpdatedAt time.Time `msgpack:"updated_at" json:"updated_at"`

	// Generation counts history replacements (reset, restore, compaction).
	Generation uint64 `msgpack:"generation" json:"generation"`
	// Base is the number of messages before Messages[0] (see type doc).
	Base int `msgpack:"base" json:"base"`
	// Messages is the history, valid input for OpenAI and Anthropic chat APIs
	// apart from tool calls that are still pending at its end.
	Messages []events.Message `msgpack:"messages" json:"messages"`
	// Pending are the tool calls not yet answered, in call order.
	Pending []PendingCall `msgpack:"pending,omitempty" json:"pending,omitempty"`
	// KV is the thread's key-value state (AgentKit state.kv).
	KV map[string]json.RawMessage `msgpack:"kv,omitempty" json:"kv,omitempty"`
	// AgentTurns counts assistant messages per agent name ("" for none).
	AgentTurns map[string]int `msgpack:"agent_turns,omitempty" json:"agent_turns,omitempty"`
	// LastUser is the last user message that is still in the history
	// (event id and seq), and LastUserAnswered whether an assistant message
	// followed it. Agent workers use these for exactly-once answers.
	// LastUser is shared between copies of a State (the fold replaces it,
	// never changes it).
	LastUser         *MessageRef `msgpack:"last_user,omitempty" json:"last_user,omitempty"`
	LastUserAnswered bool        `msgpack:"last_user_answered,omitempty" json:"last_user_answered,omitempty"`

	RejectedCount uint64      `msgpack:"rejected_count,omitempty" json:"rejected_count,omitempty"`
	Rejections    []Rejection `msgpack:"rejections,omitempty" json:"rejections,omitempty"`

	// Redactions lists the thread's redacted events (events.Redacted), in
	// the order they were redacted. The redacted events themselves read
	// with the named fields replaced (events.RedactedText).
	Redactions []Redaction `msgpack:"redactions,omitempty" json:"redactions,omitempty"`

	// Checkpoints indexes the thread's newest framework checkpoints
	// (events.CheckpointSaved and their events.CheckpointWrites) by the
	// sequences of their events; nil until the first one. It is shared
	// between copies of a State (the fold replaces it, never changes it).
	Checkpoints *CheckpointIndex `msgpack:"checkpoints,omitempty" json:"checkpoints,omitempty"`
}

// Redaction is one events.Redacted folded: which event (its sequence and
// id), which fields, why, and when (the redaction event's time, UTC).
type Redaction struct {
	Seq     uint64    `msgpack:"seq" json:"seq"`
	EventID string    `msgpack:"event_id" json:"event_id"`
	UpToSeq uint64    `msgpack:"up_to_seq,omitempty" json:"up_to_seq,omitempty"`
	Fields  []string  `msgpack:"fields,omitempty" json:"fields,omitempty"`
	Reason  string    `msgpack:"reason,omitempty" json:"reason,omitempty"`
	At      time.Time `msgpack:"at" json:"at"`
}

// MessageCount is the number of messages in the whole history.
func (s *State) MessageCount() int { return s.Base + len(s.Messages) }

// Reserve makes room in Messages for n more messages, so that a fold of
// that many events (a replay that knows how many it will read) appends
// without growing the slice by doubling: each doubling copies every
// message so far (BenchmarkApplyBytes: about a quarter of a replay's fold
// time). It changes no content; n <= 0 does nothing. Reserve at most what
// will come: the room is allocated at once (about 264 bytes a message).
func (s *State) Reserve(n int) {
	if n > 0 && cap(s.Messages)-len(s.Messages) < n {
		s.Messages = slices.Grow(s.Messages, n)
	}
}

// WaitingForAgent reports whether the thread waits for its agent: it
// exists, is neither deleted nor erased, has replies on, no tool call is
// pending, and its last message is a user message or a tool result. It is
// the one rule agent workers (whether to take a turn) and the
// OpenAI-compatible chat (whether a repeated request waits for the answer)
// follow.
func (s *State) WaitingForAgent() bool {
	if !s.Exists || s.Deleted || s.Erased || s.Replies == events.RepliesOff || len(s.Messages) == 0 || len(s.Pending) > 0 {
		return false
	}
	last := s.Messages[len(s.Messages)-1]
	return last.Role == events.RoleUser || last.Role == events.RoleTool
}

// PendingCall is a tool call awaiting its result.
type PendingCall struct {
	ID      string `msgpack:"id" json:"id"`
	Name    string `msgpack:"name" json:"name"`
	Seq     uint64 `msgpack:"seq" json:"seq"`
	EventID string `msgpack:"event_id" json:"event_id"`
}

// MessageRef points at the event of a message.
type MessageRef struct {
	EventID string `msgpack:"event_id" json:"event_id"`
	Seq     uint64 `msgpack:"seq" json:"seq"`
}

// ForkRef names the thread and sequence a thread was forked from.
type ForkRef struct {
	Tenant string `msgpack:"tenant" json:"tenant"`
	Thread string `msgpack:"thread" json:"thread"`
	Seq    uint64 `msgpack:"seq" json:"seq"`
	// ByReference: the fork's inherited history was read from the source
	// (events.Forked.ByReference), not copied into the fork's event.
	ByReference bool `msgpack:"by_reference,omitempty" json:"by_reference,omitempty"`
	// SourceErased: a fork by reference whose source no longer had the
	// history when the fork was read (erased): it starts empty.
	SourceErased bool `msgpack:"source_erased,omitempty" json:"source_erased,omitempty"`
}

// Rejection records one event the fold skipped (docs/design.md invariant 6).
type Rejection struct {
	Seq     uint64      `msgpack:"seq" json:"seq"`
	EventID string      `msgpack:"event_id,omitempty" json:"event_id,omitempty"`
	Type    events.Type `msgpack:"type,omitempty" json:"type,omitempty"`
	Reason  string      `msgpack:"reason" json:"reason"`
	Code    Code        `msgpack:"code" json:"code"`
}

// Clone returns a deep copy of s (messages are copied shallowly: Message
// values are never mutated in place by the fold).
func (s *State) Clone() *State {
	c := s.Clone0()
	c.Messages = append([]events.Message(nil), s.Messages...)
	return c
}

// Clone0 is [State.Clone] without the messages (Messages is nil in the copy).
func (s *State) Clone0() *State {
	c := new(State)
	s.Clone0To(c)
	return c
}

// Clone0To is [State.Clone0] into c, which it overwrites: for a caller
// that allocates the copy together with something else (its messages).
func (s *State) Clone0To(c *State) {
	*c = *s
	c.Messages = nil
	c.Pending = append([]PendingCall(nil), s.Pending...)
	c.Rejections = append([]Rejection(nil), s.Rejections...)
	c.Redactions = append([]Redaction(nil), s.Redactions...)
	if s.Metadata != nil {
		c.Metadata = make(map[string]string, len(s.Metadata))
		for k, v := range s.Metadata {
			c.Metadata[k] = v
		}
	}
	if s.KV != nil {
		c.KV = make(map[string]json.RawMessage, len(s.KV))
		for k, v := range s.KV {
			c.KV[k] = v
		}
	}
	if s.AgentTurns != nil {
		c.AgentTurns = make(map[string]int, len(s.AgentTurns))
		for k, v := range s.AgentTurns {
			c.AgentTurns[k] = v
		}
	}
}

// Renumber gives the events folded into s after version from the stream
// sequences the server assigned them. It is for writers that fold events
// before publishing them (as [Check] does, to give the fold's verdict
// first) with the provisional sequences from+1, from+2, ..., and keep the
// folded state once the publish is acknowledged with seqs (ascending, one
// per event), instead of folding the events a second time.
//
// The sequences of the events folded after from appear in s only in
// Version, Messages, Pending, LastUser and Rejections when those events are
// messages, tool results, state or metadata changes (message.user,
// message.assistant, tool.result, state.set, state.deleted,
// thread.updated), and in Checkpoints for checkpoint.saved and
// checkpoint.writes; Renumber handles those. For any other event type
// (a restore or fork carries messages with their own sequences, a
// compaction cuts by sequence) fold the stored events again instead;
// [Renumberable] tells which (events.TypeInfo.Renumberable).
// A provisional sequence past from+len(seqs) is left as it is.
func (s *State) Renumber(from uint64, seqs []uint64) {
	re := func(q uint64) uint64 {
		if q > from && q-from <= uint64(len(seqs)) {
			return seqs[q-from-1]
		}
		return q
	}
	s.Version = re(s.Version)
	for i := len(s.Messages) - 1; i >= 0 && s.Messages[i].Seq > from; i-- {
		s.Messages[i].Seq = re(s.Messages[i].Seq)
	}
	for i := range s.Pending {
		s.Pending[i].Seq = re(s.Pending[i].Seq)
	}
	if s.LastUser != nil && s.LastUser.Seq > from {
		lu := *s.LastUser
		lu.Seq = re(lu.Seq)
		s.LastUser = &lu
	}
	for i := range s.Rejections {
		s.Rejections[i].Seq = re(s.Rejections[i].Seq)
	}
	s.renumberCheckpoints(from, re)
}

// Renumberable reports whether [State.Renumber] can give an event of this
// payload its stored sequence (see there): message.user,
// message.assistant, tool.result, state.set, state.deleted,
// thread.updated, checkpoint.saved and checkpoint.writes.
func Renumberable(p events.Payload) bool {
	if p == nil {
		return false
	}
	ti, ok := events.Lookup(p.EventType())
	return ok && ti.Renumberable
}
