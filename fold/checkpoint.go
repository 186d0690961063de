package fold

import (
	"errors"
	"slices"

	"github.com/convlog/convlog/events"
)

// MaxCheckpointsIndexed is how many of a thread's newest checkpoints
// (events.CheckpointSaved) the index in its State names. The index lives
// in the snapshot's head, which every projector step rewrites, so it is a
// bounded window: a thread may hold any number of checkpoints, and one
// older than the window is found by reading the log (its event is there,
// at its sequence, with its writes after it).
const MaxCheckpointsIndexed = 128

// MaxCheckpointNamespaces is how many namespaces whose newest checkpoint
// left the window of [MaxCheckpointsIndexed] the index still names that
// checkpoint of ([CheckpointIndex.Latest]), so the newest checkpoint of a
// subgraph that has not saved one lately is found without reading the
// log. The namespace saved least recently leaves first.
const MaxCheckpointNamespaces = 64

// CheckpointIndex is the fold's index of a thread's checkpoints in its
// current lifetime: the newest [MaxCheckpointsIndexed] of them, in the
// order they were stored, with the sequences of their events, so a
// checkpoint read is a read of those events. The fold replaces the index
// on every change (copy on write), so a State copy may share it.
type CheckpointIndex struct {
	// Count is how many checkpoints were saved in the thread's lifetime
	// (Count > len(Entries): older ones are only in the log).
	Count uint64 `msgpack:"count" json:"count"`
	// Writes counts the checkpoint.writes events of the lifetime.
	Writes uint64 `msgpack:"writes,omitempty" json:"writes,omitempty"`
	// Entries are the newest checkpoints, oldest first.
	Entries []CheckpointEntry `msgpack:"entries" json:"entries"`
	// Latest are the newest checkpoints of namespaces that have none in
	// Entries (at most [MaxCheckpointNamespaces], one per namespace,
	// oldest first): an entry moves here when it leaves Entries as the
	// last of its namespace there, and leaves when its namespace saves
	// again.
	Latest []CheckpointEntry `msgpack:"latest,omitempty" json:"latest,omitempty"`
}

// CheckpointEntry is one indexed checkpoint.
type CheckpointEntry struct {
	// NS is the checkpoint namespace ("" for the root graph); ID its id.
	NS string `msgpack:"ns,omitempty" json:"ns,omitempty"`
	ID string `msgpack:"id" json:"id"`
	// Parent is the checkpoint it follows in NS ("" for none).
	Parent string `msgpack:"parent,omitempty" json:"parent,omitempty"`
	// Seq is the stream sequence of its checkpoint.saved event.
	Seq uint64 `msgpack:"seq" json:"seq"`
	// Writes are the sequences of the checkpoint.writes events that
	// name it, in stream order.
	Writes []uint64 `msgpack:"writes,omitempty" json:"writes,omitempty"`
}

// Find returns the index of the entry of ns and id in Entries (the newest
// such entry), or -1 (see FindLatest for Latest).
func (x *CheckpointIndex) Find(ns, id string) int {
	if x == nil {
		return -1
	}
	for i := len(x.Entries) - 1; i >= 0; i-- {
		if x.Entries[i].ID == id && x.Entries[i].NS == ns {
			return i
		}
	}
	return -1
}

// FindLatest returns the index of the entry of ns in Latest, or -1.
func (x *CheckpointIndex) FindLatest(ns string) int {
	if x == nil {
		return -1
	}
	return slices.IndexFunc(x.Latest, func(e CheckpointEntry) bool { return e.NS == ns })
}

// clone returns a copy of x whose Entries and Latest slices are its own
// (the entries' Writes slices are shared, and only ever appended to
// through a copy).
func (x *CheckpointIndex) clone() *CheckpointIndex {
	if x == nil {
		return &CheckpointIndex{}
	}
	c := *x
	c.Entries = slices.Clone(x.Entries)
	c.Latest = slices.Clone(x.Latest)
	return &c
}

// saveCheckpoint folds a checkpoint.saved: its messages join the history
// (all or none, see appendCheckpointMessages), its entry joins the index
// (replacing the entry of the same namespace and id, which a framework
// writes again when it saves a checkpoint twice), the oldest entry leaves
// when the index is full (to Latest when it was the last of its
// namespace in Entries), and the namespace's entry in Latest leaves.
func (s *State) saveCheckpoint(p events.CheckpointSaved, ev events.Stored) error {
	if err := s.appendCheckpointMessages(p.Messages, ev); err != nil {
		return err
	}
	x := s.Checkpoints.clone()
	x.Count++
	if i := x.Find(p.NS, p.ID); i >= 0 {
		x.Entries = slices.Delete(x.Entries, i, i+1)
	}
	if i := x.FindLatest(p.NS); i >= 0 {
		x.Latest = slices.Delete(x.Latest, i, i+1)
	}
	if n := len(x.Entries) - MaxCheckpointsIndexed + 1; n > 0 {
		for _, e := range x.Entries[:n] {
			if e.NS != p.NS {
				x.keepLatest(e, x.Entries[n:])
			}
		}
		x.Entries = slices.Delete(x.Entries, 0, n)
	}
	x.Entries = append(x.Entries, CheckpointEntry{NS: p.NS, ID: p.ID, Parent: p.Parent, Seq: ev.Seq})
	s.Checkpoints = x
	return nil
}

// keepLatest moves e, an entry leaving Entries, to Latest when no entry
// of its namespace stays in rest (the entries after it), replacing that
// namespace's entry; the namespace saved least recently leaves Latest
// when it holds [MaxCheckpointNamespaces].
func (x *CheckpointIndex) keepLatest(e CheckpointEntry, rest []CheckpointEntry) {
	if slices.ContainsFunc(rest, func(r CheckpointEntry) bool { return r.NS == e.NS }) {
		return
	}
	if i := x.FindLatest(e.NS); i >= 0 {
		x.Latest = slices.Delete(x.Latest, i, i+1)
	}
	if len(x.Latest) >= MaxCheckpointNamespaces {
		x.Latest = slices.Delete(x.Latest, 0, len(x.Latest)-MaxCheckpointNamespaces+1)
	}
	x.Latest = append(x.Latest, e)
}

// appendCheckpointMessages appends a checkpoint's messages to the history
// as their message events would be, with the same rules (apply on each
// message's payload, at the checkpoint event's sequence, id and time). It
// first folds them into a copy without the history (messages are only
// appended, so the verdict needs none): one refused message refuses the
// event, with the message's code, and leaves s as it was.
func (s *State) appendCheckpointMessages(msgs []events.Message, ev events.Stored) error {
	if len(msgs) == 0 {
		return nil
	}
	sub := func(i int) events.Stored {
		e := ev
		e.Payload = msgs[i].Payload()
		e.Type = e.Payload.EventType()
		return e
	}
	dry := s.window(0)
	for i := range msgs {
		if msgs[i].Payload() == nil {
			return reject(s, ev, CodeInvalid, "messages[%d]: a checkpoint's messages are user, assistant or tool messages, not %q", i, msgs[i].Role)
		}
		if err := apply(dry, sub(i), foldOpts{validated: true}); err != nil {
			var rej *RejectionError
			if errors.As(err, &rej) {
				return reject(s, ev, rej.Code, "messages[%d]: %s", i, rej.Reason)
			}
			return err
		}
	}
	for i := range msgs {
		if err := apply(s, sub(i), foldOpts{validated: true}); err != nil {
			return err // the dry run gave the same verdict: cannot happen
		}
	}
	return nil
}

// saveCheckpointWrites folds a checkpoint.writes: its sequence joins the
// entry of the checkpoint it names, in Entries or Latest, when that is
// indexed (a write for a checkpoint older than the index, or not saved,
// is only in the log).
func (s *State) saveCheckpointWrites(p events.CheckpointWrites, ev events.Stored) {
	x := s.Checkpoints.clone()
	x.Writes++
	if i := x.Find(p.NS, p.Checkpoint); i >= 0 {
		e := &x.Entries[i]
		e.Writes = append(slices.Clip(e.Writes), ev.Seq)
	} else if i := x.FindLatest(p.NS); i >= 0 && x.Latest[i].ID == p.Checkpoint {
		e := &x.Latest[i]
		e.Writes = append(slices.Clip(e.Writes), ev.Seq)
	}
	s.Checkpoints = x
}

// renumberCheckpoints gives the index's sequences after from their stored
// values re(seq) (see State.Renumber).
func (s *State) renumberCheckpoints(from uint64, re func(uint64) uint64) {
	x := s.Checkpoints
	after := func(e CheckpointEntry) bool {
		return e.Seq > from || (len(e.Writes) > 0 && e.Writes[len(e.Writes)-1] > from)
	}
	if x == nil || !slices.ContainsFunc(x.Entries, after) && !slices.ContainsFunc(x.Latest, after) {
		return
	}
	x = x.clone()
	for _, es := range [][]CheckpointEntry{x.Entries, x.Latest} {
		for i := range es {
			e := &es[i]
			e.Seq = re(e.Seq)
			if len(e.Writes) > 0 && e.Writes[len(e.Writes)-1] > from {
				w := slices.Clone(e.Writes)
				for j := range w {
					w[j] = re(w[j])
				}
				e.Writes = w
			}
		}
	}
	s.Checkpoints = x
}

// foldCheckpointSaved is the rule of checkpoint.saved (State.saveCheckpoint).
func foldCheckpointSaved(s *State, ev events.Stored, p events.CheckpointSaved) error {
	return s.saveCheckpoint(p, ev)
}

// foldCheckpointWrites is the rule of checkpoint.writes
// (State.saveCheckpointWrites).
func foldCheckpointWrites(s *State, ev events.Stored, p events.CheckpointWrites) error {
	s.saveCheckpointWrites(p, ev)
	return nil
}
