package snapstore

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/fold"
)

// This file writes a head as msgpack's reflection encoder writes it with
// compact integers (encodeHead), field by field: a map of the fields in
// declaration order, omitempty fields left out when empty. The reflection
// encoder boxes every omitempty field to test it for emptiness, an
// allocation each, and the projector writes a head on every step. The
// bytes are the same (TestHeadEncodingIsTheReflectionEncoding), so every
// reader of format 1 reads them.

// writeHead writes h, whose State has no messages (encodeHead moved them
// to Tail).
func writeHead(enc *msgpack.Encoder, h *head) error {
	return writeHeadParts(enc, h, h.State, func() error { return enc.EncodeBytes(h.Tail) })
}

// writeHeadParts is writeHead with the state st written for h.State and
// the tail written by writeTail, so that encodeHead copies neither the
// head nor its state to drop the state's messages and set the tail.
func writeHeadParts(enc *msgpack.Encoder, h *head, st *fold.State, writeTail func() error) error {
	w := mapWriter{enc: enc}
	n := 5
	if len(h.Garbage) > 0 {
		n++
	}
	if h.DeltaRev != 0 {
		n++
	}
	w.do(enc.EncodeMapLen(n))
	w.int("format", h.Format)
	w.uint("gen", h.Gen)
	w.key("state")
	if st == nil {
		w.do(enc.EncodeNil())
	} else {
		writeState(&w, st)
	}
	w.key("tail")
	w.do(writeTail())
	w.value("chunks", &h.Chunks)
	if len(h.Garbage) > 0 {
		w.value("garbage", &h.Garbage)
	}
	if h.DeltaRev != 0 {
		w.uint("delta_rev", h.DeltaRev)
	}
	return w.err
}

// writeState writes s's fields (fold.State's msgpack tags).
func writeState(w *mapWriter, s *fold.State) {
	omit := stateOmitted(s)
	n := len(omit) + 10 // the fields without omitempty
	for _, o := range omit {
		if o {
			n--
		}
	}
	w.do(w.enc.EncodeMapLen(n))
	writeStateAttributes(w, s, &omit)
	writeStateContents(w, s, &omit)
}

// stateOmitted says, for each omitempty field of fold.State in
// declaration order, whether it is empty and so left out.
func stateOmitted(s *fold.State) [22]bool {
	return [...]bool{!s.Deleted, !s.Erased, s.Owner == "", s.Agent == "", s.SystemPrompt == nil, s.Title == "",
		len(s.Metadata) == 0, s.Replies == "", s.PendingPolicy == "", s.ForkedFrom == nil, s.ExternalID == "",
		s.Lifetime == 0, s.LifetimeSeq == 0, len(s.Pending) == 0, len(s.KV) == 0, len(s.AgentTurns) == 0,
		s.LastUser == nil, !s.LastUserAnswered, s.RejectedCount == 0, len(s.Rejections) == 0,
		len(s.Redactions) == 0, s.Checkpoints == nil}
}

// writeStateAttributes writes the fields of fold.State from tenant to
// lifetime_seq: the thread's identity and attributes.
func writeStateAttributes(w *mapWriter, s *fold.State, omit *[22]bool) {
	w.str("tenant", s.Tenant)
	w.str("thread", s.Thread)
	w.uint("version", s.Version)
	w.uint("events", s.Events)
	w.bool("exists", s.Exists)
	if !omit[0] {
		w.bool("deleted", s.Deleted)
	}
	if !omit[1] {
		w.bool("erased", s.Erased)
	}
	w.strUnless(omit[2], "owner", s.Owner)
	w.strUnless(omit[3], "agent", s.Agent)
	if !omit[4] { // a pointer: dereferenced only when set
		w.str("system_prompt", *s.SystemPrompt)
	}
	w.strUnless(omit[5], "title", s.Title)
	w.valueUnless(omit[6], "metadata", s.Metadata)
	w.strUnless(omit[7], "replies", string(s.Replies))
	w.strUnless(omit[8], "pending_policy", string(s.PendingPolicy))
	w.valueUnless(omit[9], "forked_from", s.ForkedFrom)
	w.strUnless(omit[10], "external_id", s.ExternalID)
	if !omit[11] {
		w.int("lifetime", s.Lifetime)
	}
	if !omit[12] {
		w.uint("lifetime_seq", s.LifetimeSeq)
	}
}

// writeStateContents writes the fields of fold.State from created_at to
// checkpoints: times, generation, the history and what the fold keeps
// about it.
func writeStateContents(w *mapWriter, s *fold.State, omit *[22]bool) {
	w.key("created_at")
	w.do(w.enc.EncodeTime(s.CreatedAt))
	w.key("updated_at")
	w.do(w.enc.EncodeTime(s.UpdatedAt))
	w.uint("generation", s.Generation)
	w.int("base", s.Base)
	w.value("messages", &s.Messages)
	w.valueUnless(omit[13], "pending", &s.Pending)
	w.valueUnless(omit[14], "kv", s.KV)
	w.valueUnless(omit[15], "agent_turns", s.AgentTurns)
	w.valueUnless(omit[16], "last_user", s.LastUser)
	if !omit[17] {
		w.bool("last_user_answered", s.LastUserAnswered)
	}
	if !omit[18] {
		w.uint("rejected_count", s.RejectedCount)
	}
	w.valueUnless(omit[19], "rejections", &s.Rejections)
	w.valueUnless(omit[20], "redactions", &s.Redactions)
	w.valueUnless(omit[21], "checkpoints", s.Checkpoints)
}
