package fold

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/convlog/convlog/events"
)

// NewState returns the empty state of tenant/thread (version 0, not existing).
func NewState(tenant, thread string) *State {
	return &State{Tenant: tenant, Thread: thread}
}

// Apply folds one stored event into s in place. It is pure and
// deterministic: it reads nothing but s and ev, and never panics.
//
// Results:
//   - nil: the event was applied (or ev.Seq <= s.Version, already folded:
//     then nothing changes, so redelivery is harmless).
//   - *RejectionError (wraps [ErrRejected]): the event breaks an invariant;
//     it was recorded in s.Rejections, s.Version advanced, history unchanged.
//   - [ErrNeedHistory]: s is a window and the event needs older messages;
//     s is unchanged.
//
// Apply is not safe for concurrent use on the same State.
func Apply(s *State, ev events.Stored) error { return applyEvent(s, ev, foldOpts{}) }

// ApplyValidated is [Apply] for an event that [events.Event.Validate] has
// just accepted: it does not validate ev again (about half the cost of
// folding a message). Writers that validate, then check an append against
// the fold (client.Append), use it. An event Validate would refuse must go
// through Apply, which records it as rejected; given one, ApplyValidated
// may apply it.
func ApplyValidated(s *State, ev events.Stored) error {
	return applyEvent(s, ev, foldOpts{validated: true})
}

// parentState is what ApplyFork was given.
type parentState struct {
	messages []events.Message
	kv       map[string]json.RawMessage
	gone     bool
}

// ApplyFork folds a fork by reference (events.Forked with ByReference)
// with its source's projected messages and key-value state as of the
// fork's source sequence (the caller read them; their Seq, EventID and
// Time are replaced by the fork event's, as a copy fork's are). With
// gone, the source no longer has that history (erased, or never had it):
// the fork starts empty and State.ForkedFrom.SourceErased says so. Any
// other event goes to Apply. The verdicts are Apply's; the same inputs
// always give the same state.
func ApplyFork(s *State, ev events.Stored, messages []events.Message, kv map[string]json.RawMessage, gone bool) error {
	if f, ok := ev.Payload.(events.Forked); !ok || !f.ByReference {
		return Apply(s, ev)
	}
	return applyEvent(s, ev, foldOpts{parent: &parentState{messages: messages, kv: kv, gone: gone}})
}

// ApplyErasure folds an erasure marker (events.Erased) over s, a state of
// events stored before it, after the caller has checked with the stream
// that the marker is the first message now stored on the thread's subject:
// the events s holds were purged, as client.Erase does before it writes
// the marker. [Apply] rejects such a marker over a non-empty state
// (CodeErasureNotFirst), so that a marker published by hand after events
// that are still stored cannot hide the thread. Results as [Apply]; an
// event of another type is applied as by Apply.
func ApplyErasure(s *State, ev events.Stored) error {
	if ev.Type != events.TypeErased {
		return Apply(s, ev)
	}
	return applyEvent(s, ev, foldOpts{erasureProven: true})
}

// foldOpts are what a caller of apply vouches for.
type foldOpts struct {
	// validated: events.Event.Validate accepted the event.
	validated bool
	// parent: the source of a fork by reference (ApplyFork).
	parent *parentState
	// erasureProven: an erasure marker is the first message stored on
	// the subject (ApplyErasure).
	erasureProven bool
}

func applyEvent(s *State, ev events.Stored, o foldOpts) error {
	if ev.Seq != 0 && ev.Seq <= s.Version {
		return nil
	}
	err := apply(s, ev, o)
	if errors.Is(err, ErrNeedHistory) || errors.Is(err, ErrNeedParent) {
		return err
	}
	s.Events++
	if ev.Seq != 0 {
		s.Version = ev.Seq
	}
	if err != nil {
		var rej *RejectionError
		if errors.As(err, &rej) {
			s.reject(rej.Rejection)
		}
		return err
	}
	return nil
}

// ApplyBytes decodes data (a message stored on the thread's subject at seq)
// and folds it like [Apply]. Bytes that do not decode, or decode to an
// unknown type or newer schema, are recorded as rejections; ApplyBytes never
// panics.
func ApplyBytes(s *State, seq uint64, storedAt time.Time, data []byte) error {
	return applyBytes(s, seq, storedAt, data, events.Unmarshal)
}

// ApplyBytesNoCopy is [ApplyBytes] decoding with [events.UnmarshalNoCopy]:
// the strings of what it folds into s share data's memory, so data must
// never be modified afterwards, for as long as s (or a message taken from
// it) is reachable. The client's replay folds the buffers nats.go hands
// out so.
func ApplyBytesNoCopy(s *State, seq uint64, storedAt time.Time, data []byte) error {
	return applyBytes(s, seq, storedAt, data, events.UnmarshalNoCopy)
}

// applyBytes is ApplyBytes with its decoder.
func applyBytes(s *State, seq uint64, storedAt time.Time, data []byte, unmarshal func([]byte) (events.Event, error)) error {
	if seq != 0 && seq <= s.Version {
		return nil
	}
	ev, err := unmarshal(data)
	if err != nil {
		code := CodeUndecodable
		switch {
		case errors.Is(err, events.ErrUnknownType):
			code = CodeUnknownType
		case errors.Is(err, events.ErrNewerSchema):
			code = CodeNewerSchema
		}
		rej := &RejectionError{Tenant: s.Tenant, Thread: s.Thread,
			Rejection: Rejection{Seq: seq, EventID: ev.ID, Type: ev.Type, Reason: err.Error(), Code: code}}
		s.Events++
		if seq != 0 {
			s.Version = seq
		}
		s.reject(rej.Rejection)
		return rej
	}
	return Apply(s, events.Stored{Event: ev, Seq: seq, StoredAt: storedAt})
}

// Check reports the verdict Apply would give ev on s, without changing s:
// nil, a *RejectionError, ErrNeedHistory, or ErrNeedParent (a fork by
// reference, whose history the fold does not read). Writers use it to refuse an
// append before publishing (docs/design.md invariant 6).
func Check(s *State, ev events.Stored) error {
	// Most events only append: check on a small window so the cost does not
	// grow with the history; fall back to the whole history when needed.
	c := s.window(4)
	err := apply(c, ev, foldOpts{})
	if errors.Is(err, ErrNeedHistory) {
		err = apply(s.Clone(), ev, foldOpts{})
	}
	return err
}

// window returns a copy of s holding only its last k messages.
func (s *State) window(k int) *State {
	c := s.Clone0()
	if len(s.Messages) > k {
		c.Base = s.Base + len(s.Messages) - k
		c.Messages = append([]events.Message(nil), s.Messages[len(s.Messages)-k:]...)
	} else {
		c.Messages = append([]events.Message(nil), s.Messages...)
	}
	return c
}

func (s *State) reject(r Rejection) {
	s.RejectedCount++
	s.Rejections = append(s.Rejections, r)
	if len(s.Rejections) > MaxRejectionsKept {
		s.Rejections = append([]Rejection(nil), s.Rejections[len(s.Rejections)-MaxRejectionsKept:]...)
	}
}

func apply(s *State, ev events.Stored, o foldOpts) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = reject(s, ev, CodeInvalid, "fold panicked: %v", r)
		}
	}()
	if ev.Tenant != s.Tenant || ev.Thread != s.Thread {
		return reject(s, ev, CodeWrongThread, "event is for %s/%s but was stored on thread %s/%s", ev.Tenant, ev.Thread, s.Tenant, s.Thread)
	}
	if !o.validated {
		if err := ev.Validate(); err != nil {
			return reject(s, ev, CodeInvalid, "%v", err)
		}
	}
	if s.Erased {
		return reject(s, ev, CodeErased, "thread was erased")
	}
	t := ev.Time.UTC()
	switch p := ev.Payload.(type) {
	case events.Erased:
		// The marker stands on an empty (purged) subject: folded from the
		// log, nothing comes before it. Over a state of events stored
		// before it, the caller must prove the purge (ApplyErasure);
		// otherwise it is a marker published by hand after events that are
		// still stored, and must not hide them.
		if s.Version != 0 && !o.erasureProven {
			return reject(s, ev, CodeErasureNotFirst, "an erasure marker must be the first message stored on the thread's subject (erase purges the subject first), but events up to sequence %d are stored before it", s.Version)
		}
		*s = State{Tenant: s.Tenant, Thread: s.Thread, Version: s.Version, Events: s.Events,
			Erased: true, CreatedAt: s.CreatedAt, UpdatedAt: t, RejectedCount: s.RejectedCount}
		return nil
	case events.ThreadCreated:
		if err := s.canCreate(p, ev); err != nil {
			return err
		}
		s.create(p, ev, t)
		return nil
	case events.Forked:
		if err := s.canCreate(p.Created, ev); err != nil {
			return err
		}
		if p.ByReference {
			if o.parent == nil {
				return ErrNeedParent
			}
			if o.parent.gone {
				s.fork(p, ev, t, nil, nil, nil)
				s.ForkedFrom.SourceErased = true
				return nil
			}
			msgs, pending, err := checkHistory(o.parent.messages, ev)
			if err != nil {
				return reject(s, ev, CodeInvalidHistory, "history of the source %s/%s as of %d: %v", p.SourceTenant, p.SourceThread, p.SourceSeq, err)
			}
			s.fork(p, ev, t, msgs, pending, o.parent.kv)
			return nil
		}
		msgs, pending, err := checkHistory(p.Messages, ev)
		if err != nil {
			return reject(s, ev, CodeInvalidHistory, "forked history: %v", err)
		}
		s.fork(p, ev, t, msgs, pending, p.State)
		return nil
	}
	if !s.Exists {
		return reject(s, ev, CodeNoThread, "thread does not exist (its first event must be %s or %s)", events.TypeThreadCreated, events.TypeForked)
	}
	if s.Deleted {
		if _, ok := ev.Payload.(events.Undeleted); !ok {
			return reject(s, ev, CodeDeleted, "thread is deleted (undelete it first)")
		}
	}
	switch p := ev.Payload.(type) {
	case events.ThreadUpdated:
		if p.Title != nil {
			s.Title = *p.Title
		}
		if p.SystemPrompt != nil {
			sp := *p.SystemPrompt
			s.SystemPrompt = &sp
		}
		if p.Agent != nil {
			s.Agent = *p.Agent
		}
		if p.Replies != "" {
			s.Replies = p.Replies
		}
		for k, v := range p.Metadata {
			if v == "" {
				delete(s.Metadata, k)
				continue
			}
			if s.Metadata == nil {
				s.Metadata = map[string]string{}
			}
			s.Metadata[k] = v
		}
	case events.UserMessage:
		if err := s.closePending(ev); err != nil {
			return err
		}
		m, _ := events.MessageOf(p)
		s.appendMessage(m, ev)
		s.LastUser = &MessageRef{EventID: ev.ID, Seq: ev.Seq}
		s.LastUserAnswered = false
	case events.AssistantMessage:
		if err := s.closePending(ev); err != nil {
			return err
		}
		m, _ := events.MessageOf(p)
		s.appendMessage(m, ev)
		for _, c := range p.ToolCalls {
			s.Pending = append(s.Pending, PendingCall{ID: c.ID, Name: c.Name, Seq: ev.Seq, EventID: ev.ID})
		}
		if s.AgentTurns == nil {
			s.AgentTurns = map[string]int{}
		}
		s.AgentTurns[p.Agent]++
		if s.LastUser != nil {
			s.LastUserAnswered = true
		}
	case events.ToolResult:
		i := s.pendingIndex(p.ToolCallID)
		if i < 0 {
			return reject(s, ev, CodeNotPending, "tool result for call %q, which is not pending (pending: %s)", p.ToolCallID, s.pendingIDs())
		}
		s.Pending = append(s.Pending[:i:i], s.Pending[i+1:]...)
		m, _ := events.MessageOf(p)
		s.appendMessage(m, ev)
	case events.Reset:
		s.replaceHistory(nil, nil)
	case events.Restore:
		msgs, pending, err := checkHistory(p.Messages, ev)
		if err != nil {
			return reject(s, ev, CodeInvalidHistory, "restored history: %v", err)
		}
		s.replaceHistory(msgs, pending)
	case events.Compaction:
		return s.compact(p, ev)
	case events.StateSet:
		if n := s.kvBytes() - s.kvEntryBytes(p.Key) + len(p.Key) + len(p.Value); n > MaxStateBytes {
			return reject(s, ev, CodeTooLarge, "the thread's state would be %d bytes, the limit is %d", n, MaxStateBytes)
		}
		s.setKV(p.Key, p.Value)
	case events.StateDeleted:
		delete(s.KV, p.Key)
	case events.CheckpointSaved:
		if err := s.saveCheckpoint(p, ev); err != nil {
			return err
		}
	case events.CheckpointWrites:
		s.saveCheckpointWrites(p, ev)
	case events.Deleted:
		s.Deleted = true
	case events.Undeleted:
		if !s.Deleted {
			return reject(s, ev, CodeInvalid, "thread is not deleted")
		}
		s.Deleted = false
	case events.Redacted:
		// The redacted event already reads redacted (its key was
		// destroyed and readers take its replacement), so the history
		// needs no change here; the state records the redaction.
		if max(p.Seq, p.UpToSeq) >= ev.Seq {
			return reject(s, ev, CodeInvalid, "redacts seq %d, which is not before it (%d)", max(p.Seq, p.UpToSeq), ev.Seq)
		}
		s.Redactions = append(s.Redactions, Redaction{Seq: p.Seq, EventID: p.EventID, UpToSeq: p.UpToSeq, Fields: p.Fields, Reason: p.Reason, At: t})
	default:
		return reject(s, ev, CodeUnknownType, "no fold rule for %T", p)
	}
	s.UpdatedAt = t
	return nil
}

func reject(s *State, ev events.Stored, code Code, format string, args ...any) error {
	return &RejectionError{Tenant: s.Tenant, Thread: s.Thread, Rejection: Rejection{
		Seq: ev.Seq, EventID: ev.ID, Type: ev.Type, Code: code, Reason: fmt.Sprintf(format, args...)}}
}

// canCreate checks a thread.created (or a fork's) against the state: the
// thread must not exist, or be soft-deleted (the create starts a new
// lifetime), and an external id must map to the thread's id.
func (s *State) canCreate(p events.ThreadCreated, ev events.Stored) error {
	if s.Exists && !s.Deleted {
		return reject(s, ev, CodeAlreadyExists, "thread already exists")
	}
	if p.ExternalID != "" {
		if id, _, err := events.ThreadIDFor(p.ExternalID); err != nil || id != s.Thread {
			return reject(s, ev, CodeInvalid, "external id %q maps to thread id %q, not %q", p.ExternalID, id, s.Thread)
		}
	}
	return nil
}

// create applies a thread.created (or a fork's). On a soft-deleted thread
// it starts a new lifetime: everything of the old one is dropped from the
// state (its events stay in the log, readable at their sequences), only
// the counters of the subject (Version, Events, Generation, rejections)
// carry on, and Lifetime counts up.
func (s *State) create(p events.ThreadCreated, ev events.Stored, t time.Time) {
	if s.Exists {
		*s = State{Tenant: s.Tenant, Thread: s.Thread, Version: s.Version, Events: s.Events,
			Generation: s.Generation, Lifetime: s.Lifetime + 1,
			RejectedCount: s.RejectedCount, Rejections: s.Rejections}
		s.replaceHistory(nil, nil)
		s.LifetimeSeq = ev.Seq
	}
	s.ExternalID = p.ExternalID
	s.Exists = true
	s.Owner, s.Agent, s.Title = p.Owner, p.Agent, p.Title
	if p.SystemPrompt != nil {
		sp := *p.SystemPrompt
		s.SystemPrompt = &sp
	}
	if len(p.Metadata) > 0 {
		s.Metadata = make(map[string]string, len(p.Metadata))
		for k, v := range p.Metadata {
			s.Metadata[k] = v
		}
	}
	s.Replies, s.PendingPolicy = p.Replies, p.PendingPolicy
	s.CreatedAt, s.UpdatedAt = t, t
}

// MaxStateBytes bounds a thread's key-value state (keys plus values, in
// bytes): a state.set that would exceed it is rejected with [CodeTooLarge].
// The state lives in the snapshot head, which must fit in one NATS message.
const MaxStateBytes = 256 << 10

func (s *State) kvBytes() int {
	n := 0
	for k, v := range s.KV {
		n += len(k) + len(v)
	}
	return n
}

func (s *State) kvEntryBytes(k string) int {
	if v, ok := s.KV[k]; ok {
		return len(k) + len(v)
	}
	return 0
}

func (s *State) setKV(k string, v json.RawMessage) {
	if s.KV == nil {
		s.KV = map[string]json.RawMessage{}
	}
	s.KV[k] = append(json.RawMessage(nil), v...)
}

func (s *State) appendMessage(m events.Message, ev events.Stored) {
	m.Seq, m.EventID, m.Time = ev.Seq, ev.ID, ev.Time.UTC()
	s.Messages = append(s.Messages, m)
}

func (s *State) pendingIndex(id string) int {
	for i, p := range s.Pending {
		if p.ID == id {
			return i
		}
	}
	return -1
}

func (s *State) pendingIDs() string {
	if len(s.Pending) == 0 {
		return "none"
	}
	b, _ := json.Marshal(func() []string {
		ids := make([]string, len(s.Pending))
		for i, p := range s.Pending {
			ids[i] = p.ID
		}
		return ids
	}())
	return string(b)
}

// closePending applies the thread's pending policy before a user or
// assistant message.
func (s *State) closePending(ev events.Stored) error {
	if len(s.Pending) == 0 {
		return nil
	}
	if s.PendingPolicy != events.PendingCancel {
		return reject(s, ev, CodePendingCalls, "%d tool call(s) are still pending (%s); answer them first, or create the thread with pending_policy %q",
			len(s.Pending), s.pendingIDs(), events.PendingCancel)
	}
	for _, p := range s.Pending {
		s.Messages = append(s.Messages, events.Message{Role: events.RoleTool, ToolCallID: p.ID, Name: p.Name,
			Content: events.Text(events.CancelledContent), IsError: true, Seq: ev.Seq, EventID: ev.ID,
			Time: ev.Time.UTC(), Synthetic: true})
	}
	s.Pending = nil
	return nil
}

// fork creates the thread as the fork p with the given history (checked
// and stamped) and state.
func (s *State) fork(p events.Forked, ev events.Stored, t time.Time, msgs []events.Message, pending []PendingCall, kv map[string]json.RawMessage) {
	s.create(p.Created, ev, t)
	s.ForkedFrom = &ForkRef{Tenant: p.SourceTenant, Thread: p.SourceThread, Seq: p.SourceSeq, ByReference: p.ByReference}
	s.replaceHistory(msgs, pending)
	s.Generation = 0
	for k, v := range kv {
		s.setKV(k, v)
	}
}

func (s *State) replaceHistory(msgs []events.Message, pending []PendingCall) {
	s.Messages, s.Pending, s.Base = msgs, pending, 0
	s.Generation++
	s.LastUser, s.LastUserAnswered = nil, false
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == events.RoleUser {
			s.LastUser = &MessageRef{EventID: msgs[i].EventID, Seq: msgs[i].Seq}
			s.LastUserAnswered = i < len(msgs)-1
			break
		}
	}
}

// checkHistory checks that ms is a valid history (each tool message answers
// a call pending at that point) and returns it stamped with ev's sequence,
// plus the calls left pending at its end.
func checkHistory(ms []events.Message, ev events.Stored) ([]events.Message, []PendingCall, error) {
	out := make([]events.Message, len(ms))
	var pending []PendingCall
	for i, m := range ms {
		switch m.Role {
		case events.RoleTool:
			j := -1
			for k, p := range pending {
				if p.ID == m.ToolCallID {
					j = k
					break
				}
			}
			if j < 0 {
				return nil, nil, fmt.Errorf("message %d: tool result for call %q, which is not pending there", i, m.ToolCallID)
			}
			pending = append(pending[:j:j], pending[j+1:]...)
		case events.RoleUser, events.RoleAssistant, events.RoleSystem:
			if len(pending) > 0 {
				return nil, nil, fmt.Errorf("message %d (%s): %d tool call(s) still pending before it", i, m.Role, len(pending))
			}
			for _, c := range m.ToolCalls {
				pending = append(pending, PendingCall{ID: c.ID, Name: c.Name, Seq: ev.Seq, EventID: ev.ID})
			}
		}
		m.Seq, m.EventID, m.Time = ev.Seq, ev.ID, ev.Time.UTC()
		out[i] = m
	}
	return out, pending, nil
}

func (s *State) compact(p events.Compaction, ev events.Stored) error {
	if p.UpToSeq >= ev.Seq && ev.Seq != 0 {
		return reject(s, ev, CodeInvalidHistory, "compaction up_to_seq %d is not before the compaction itself (seq %d)", p.UpToSeq, ev.Seq)
	}
	for _, pc := range s.Pending {
		if pc.Seq <= p.UpToSeq {
			return reject(s, ev, CodeInvalidHistory, "compaction up to seq %d would separate pending tool call %q (seq %d) from its result", p.UpToSeq, pc.ID, pc.Seq)
		}
	}
	// Index of the first message kept.
	cut := 0
	for cut < len(s.Messages) && s.Messages[cut].Seq <= p.UpToSeq {
		cut++
	}
	if cut == 0 && s.Base > 0 {
		// The cut falls before the window: the messages kept include some
		// that are not in memory.
		return ErrNeedHistory
	}
	// cut > 0: every message before the window is older than the window's
	// first message, so it is cut too and need not be loaded.
	if cut < len(s.Messages) && s.Messages[cut].Role == events.RoleTool {
		return reject(s, ev, CodeInvalidHistory, "compaction up to seq %d would separate tool result %q (seq %d) from its call", p.UpToSeq, s.Messages[cut].ToolCallID, s.Messages[cut].Seq)
	}
	role := p.Role
	if role == "" {
		role = events.RoleUser
	}
	// The summary stands for the messages up to UpToSeq, so it carries that
	// sequence: message sequences never decrease along a history, which
	// keeps a later compaction's cut the same on a window as on the whole
	// history (and lets chunks be searched by sequence).
	summary := events.Message{Role: role, Content: p.Summary, Seq: p.UpToSeq, EventID: ev.ID, Time: ev.Time.UTC(), Synthetic: true}
	kept := append([]events.Message{summary}, s.Messages[cut:]...)
	lastUser, answered := s.LastUser, s.LastUserAnswered
	s.replaceHistory(kept, s.Pending)
	if lastUser != nil && lastUser.Seq > p.UpToSeq {
		s.LastUser, s.LastUserAnswered = lastUser, answered
	}
	s.UpdatedAt = ev.Time.UTC()
	return nil
}
