package fold

// This file holds the fold rule of each event type. A new event type is
// one entry in foldRules and its function.

import (
	"errors"

	"github.com/convlog/convlog/events"
)

// foldFunc folds ev into s (whose thread, validity and erasure apply has
// checked) and returns nil, a *RejectionError, ErrNeedHistory or
// ErrNeedParent.
type foldFunc func(s *State, ev events.Stored, o foldOpts) error

// foldRules are the fold rules by event type: anyThread for the events
// that start (or end) a thread, onThread for those that need an existing
// thread, which set State.UpdatedAt once applied.
var foldRules map[events.Type]foldFunc

// init fills foldRules: a rule may fold events through apply (a
// checkpoint carrying messages), which reads foldRules, so the map cannot
// be a variable initializer.
func init() {
	foldRules = map[events.Type]foldFunc{
		events.TypeErased:           anyThread(foldErased),
		events.TypeThreadCreated:    anyThread(foldCreated),
		events.TypeForked:           anyThread(foldForked),
		events.TypeThreadUpdated:    onThread(foldUpdated),
		events.TypeUserMessage:      onThread(foldUserMessage),
		events.TypeAssistantMessage: onThread(foldAssistantMessage),
		events.TypeToolResult:       onThread(foldToolResult),
		events.TypeReset:            onThread(foldReset),
		events.TypeRestore:          onThread(foldRestore),
		events.TypeCompaction:       onThread(foldCompaction),
		events.TypeStateSet:         onThread(foldStateSet),
		events.TypeStateDeleted:     onThread(foldStateDeleted),
		events.TypeDeleted:          onThread(foldDeleted),
		events.TypeUndeleted:        onThread(foldUndeleted),
		events.TypeRedacted:         onThread(foldRedacted),
		events.TypeCheckpointSaved:  onThread(foldCheckpointSaved),
		events.TypeCheckpointWrites: onThread(foldCheckpointWrites),
	}
}

// errNoRule is a payload whose EventType has a rule but whose Go type is
// not the rule's (a pointer to the payload, say): no rule applies.
var errNoRule = errors.New("fold: no rule for the payload's Go type")

// anyThread is the rule of payloads of type P that apply to a thread
// whether it exists or not (creation, fork, erasure).
func anyThread[P events.Payload](f func(s *State, ev events.Stored, p P, o foldOpts) error) foldFunc {
	return func(s *State, ev events.Stored, o foldOpts) error {
		p, ok := ev.Payload.(P)
		if !ok {
			return errNoRule
		}
		return f(s, ev, p, o)
	}
}

// onThread is the rule of payloads of type P that need an existing thread,
// not soft-deleted unless P is events.Undeleted. Applied, they set
// State.UpdatedAt to the event's time.
func onThread[P events.Payload](f func(s *State, ev events.Stored, p P) error) foldFunc {
	return func(s *State, ev events.Stored, _ foldOpts) error {
		p, ok := ev.Payload.(P)
		if !ok {
			return errNoRule
		}
		if err := s.needThread(ev); err != nil {
			return err
		}
		if err := f(s, ev, p); err != nil {
			return err
		}
		s.UpdatedAt = ev.Time.UTC()
		return nil
	}
}

// needThread rejects ev unless the thread exists and is not soft-deleted
// (an undelete excepted).
func (s *State) needThread(ev events.Stored) error {
	if !s.Exists {
		return reject(s, ev, CodeNoThread, "thread does not exist (its first event must be %s or %s)", events.TypeThreadCreated, events.TypeForked)
	}
	if s.Deleted {
		if _, ok := ev.Payload.(events.Undeleted); !ok {
			return reject(s, ev, CodeDeleted, "thread is deleted (undelete it first)")
		}
	}
	return nil
}

// foldErased: the marker stands on an empty (purged) subject: folded from
// the log, nothing comes before it. Over a state of events stored before
// it, the caller must prove the purge (ApplyErasure); otherwise it is a
// marker published by hand after events that are still stored, and must
// not hide them.
func foldErased(s *State, ev events.Stored, _ events.Erased, o foldOpts) error {
	if s.Version != 0 && !o.erasureProven {
		return reject(s, ev, CodeErasureNotFirst, "an erasure marker must be the first message stored on the thread's subject (erase purges the subject first), but events up to sequence %d are stored before it", s.Version)
	}
	*s = State{Tenant: s.Tenant, Thread: s.Thread, Version: s.Version, Events: s.Events,
		Erased: true, CreatedAt: s.CreatedAt, UpdatedAt: ev.Time.UTC(), RejectedCount: s.RejectedCount}
	return nil
}

func foldCreated(s *State, ev events.Stored, p events.ThreadCreated, _ foldOpts) error {
	if err := s.canCreate(p, ev); err != nil {
		return err
	}
	s.create(p, ev, ev.Time.UTC())
	return nil
}

// foldForked applies a fork with its history: copied in the event, or by
// reference, from the source as the caller read it (ApplyFork).
func foldForked(s *State, ev events.Stored, p events.Forked, o foldOpts) error {
	if err := s.canCreate(p.Created, ev); err != nil {
		return err
	}
	t := ev.Time.UTC()
	if !p.ByReference {
		msgs, pending, err := checkHistory(p.Messages, ev)
		if err != nil {
			return reject(s, ev, CodeInvalidHistory, "forked history: %v", err)
		}
		s.fork(p, ev, t, msgs, pending, p.State)
		return nil
	}
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

func foldUpdated(s *State, _ events.Stored, p events.ThreadUpdated) error {
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
	return nil
}

func foldUserMessage(s *State, ev events.Stored, p events.UserMessage) error {
	if err := s.closePending(ev); err != nil {
		return err
	}
	m, _ := events.MessageOf(p)
	s.appendMessage(m, ev)
	s.LastUser = &MessageRef{EventID: ev.ID, Seq: ev.Seq}
	s.LastUserAnswered = false
	return nil
}

func foldAssistantMessage(s *State, ev events.Stored, p events.AssistantMessage) error {
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
	return nil
}

func foldToolResult(s *State, ev events.Stored, p events.ToolResult) error {
	i := s.pendingIndex(p.ToolCallID)
	if i < 0 {
		return reject(s, ev, CodeNotPending, "tool result for call %q, which is not pending (pending: %s)", p.ToolCallID, s.pendingIDs())
	}
	s.Pending = append(s.Pending[:i:i], s.Pending[i+1:]...)
	m, _ := events.MessageOf(p)
	s.appendMessage(m, ev)
	return nil
}

func foldReset(s *State, _ events.Stored, _ events.Reset) error {
	s.replaceHistory(nil, nil)
	return nil
}

func foldRestore(s *State, ev events.Stored, p events.Restore) error {
	msgs, pending, err := checkHistory(p.Messages, ev)
	if err != nil {
		return reject(s, ev, CodeInvalidHistory, "restored history: %v", err)
	}
	s.replaceHistory(msgs, pending)
	return nil
}

func foldCompaction(s *State, ev events.Stored, p events.Compaction) error {
	return s.compact(p, ev)
}

func foldStateSet(s *State, ev events.Stored, p events.StateSet) error {
	if n := s.kvBytes() - s.kvEntryBytes(p.Key) + len(p.Key) + len(p.Value); n > MaxStateBytes {
		return reject(s, ev, CodeTooLarge, "the thread's state would be %d bytes, the limit is %d", n, MaxStateBytes)
	}
	s.setKV(p.Key, p.Value)
	return nil
}

func foldStateDeleted(s *State, _ events.Stored, p events.StateDeleted) error {
	delete(s.KV, p.Key)
	return nil
}

func foldDeleted(s *State, _ events.Stored, _ events.Deleted) error {
	s.Deleted = true
	return nil
}

func foldUndeleted(s *State, ev events.Stored, _ events.Undeleted) error {
	if !s.Deleted {
		return reject(s, ev, CodeInvalid, "thread is not deleted")
	}
	s.Deleted = false
	return nil
}

// foldRedacted records a redaction. The redacted event already reads
// redacted (its key was destroyed and readers take its replacement), so
// the history needs no change.
func foldRedacted(s *State, ev events.Stored, p events.Redacted) error {
	if max(p.Seq, p.UpToSeq) >= ev.Seq {
		return reject(s, ev, CodeInvalid, "redacts seq %d, which is not before it (%d)", max(p.Seq, p.UpToSeq), ev.Seq)
	}
	s.Redactions = append(s.Redactions, Redaction{Seq: p.Seq, EventID: p.EventID, UpToSeq: p.UpToSeq, Fields: p.Fields, Reason: p.Reason, At: ev.Time.UTC()})
	return nil
}
