package events

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// MaxCheckpointNSLen bounds a checkpoint namespace, in bytes: a
// subgraph's namespace is the path of its parents' task ids
// ("outer:<task id>|inner:<task id>"), longer than a name.
const MaxCheckpointNSLen = 1024

// CheckpointSaved is one checkpoint of an agent framework's graph
// (LangGraph's BaseCheckpointSaver.put): the whole checkpoint in one
// event, so a checkpoint write is one append and a checkpoint read is one
// read of the event at the sequence the fold's index names
// (fold.State.Checkpoints). The values are what the framework's
// serializer produced, as value objects (schemas/payloads/checkpoint.saved.json):
// {"type", "json"} for a value that serializes to JSON, {"type",
// "base64"} for other bytes, {"type", "blob", "size"} for a value stored
// as a blob of the thread (larger than a writer keeps in an event).
// The graph's new messages travel in Messages (one event per checkpoint,
// @convlog/langgraph's default) or, for a writer that wants them as
// events of their own, as message events in the same atomic append.
type CheckpointSaved struct {
	// NS is the checkpoint namespace: "" for the root graph.
	NS string `msgpack:"ns,omitempty" json:"ns,omitempty"`
	// ID is the checkpoint id, unique in NS.
	ID string `msgpack:"id" json:"id"`
	// Parent is the id of the checkpoint this one follows in NS ("" for
	// the first).
	Parent string `msgpack:"parent,omitempty" json:"parent,omitempty"`
	// Checkpoint is the serialized checkpoint without its channel values
	// (a value object).
	Checkpoint json.RawMessage `msgpack:"checkpoint" json:"checkpoint"`
	// Metadata is the checkpoint's serialized metadata (a value object).
	Metadata json.RawMessage `msgpack:"metadata,omitempty" json:"metadata,omitempty"`
	// Channels is a JSON object mapping each channel that has a value to
	// its value object (JSON text as the writer gave it, so its bytes are
	// the writer's: a msgpack bin holding the text).
	Channels json.RawMessage `msgpack:"channels,omitempty" json:"channels,omitempty"`
	// Messages are the graph's new messages (user, assistant, tool), which
	// the fold appends to the thread's history in order, as their
	// message.user, message.assistant and tool.result events would be
	// (tool-call matching and the pending policy apply; one refused
	// message refuses the event). It is for writers that keep a
	// checkpoint and its messages in one event; the others append the
	// message events beside the checkpoint in one atomic append.
	Messages []Message `msgpack:"messages,omitempty" json:"messages,omitempty"`
}

// EventType implements Payload.
func (CheckpointSaved) EventType() Type { return TypeCheckpointSaved }

func (v *CheckpointSaved) canonicalize() {
	canonicalMessages(v.Messages)
	v.Messages = nilIfEmpty(v.Messages)
}

// CheckpointWrites is the pending writes one task of a graph step made
// against a checkpoint (LangGraph's BaseCheckpointSaver.putWrites), one
// event per call. Writes is a JSON array of {"idx", "channel", "value"}
// (idx an integer, negative for the framework's special channels; value a
// value object as in [CheckpointSaved]). Readers keep the first write of
// a task and a non-negative idx and skip later copies, as LangGraph's
// savers store such a write once.
type CheckpointWrites struct {
	// NS is the checkpoint namespace: "" for the root graph.
	NS string `msgpack:"ns,omitempty" json:"ns,omitempty"`
	// Checkpoint is the id of the checkpoint the writes belong to.
	Checkpoint string `msgpack:"checkpoint" json:"checkpoint"`
	// Task is the id of the task that wrote.
	Task string `msgpack:"task" json:"task"`
	// Path is the task's path ("" when the framework gave none).
	Path string `msgpack:"path,omitempty" json:"path,omitempty"`
	// Writes is the JSON array of writes, in the task's order.
	Writes json.RawMessage `msgpack:"writes" json:"writes"`
}

// EventType implements Payload.
func (CheckpointWrites) EventType() Type { return TypeCheckpointWrites }

// validateCheckpointIDs checks a namespace and the ids of a checkpoint
// event (each named by field; "" ids are checked by the caller).
func validateCheckpointIDs(ns string, ids []struct{ field, v string }, l Limits, bad badFunc) error {
	if len(ns) > MaxCheckpointNSLen {
		return bad("ns", "is %d bytes, the limit is %d", len(ns), MaxCheckpointNSLen)
	}
	if !utf8.ValidString(ns) {
		return bad("ns", "is not valid UTF-8")
	}
	for _, id := range ids {
		if len(id.v) > l.MaxNameLen {
			return bad(id.field, "is %d bytes, the limit is %d", len(id.v), l.MaxNameLen)
		}
		if !utf8.ValidString(id.v) {
			return bad(id.field, "is not valid UTF-8")
		}
	}
	return nil
}

// validateCheckpointSaved checks v on its own: ids, and JSON objects
// where value objects go (one pass over each field; a value object's
// fields are the writer's business).
func validateCheckpointSaved(v CheckpointSaved, l Limits, bad badFunc) error {
	if v.ID == "" {
		return bad("id", "is required")
	}
	if err := validateCheckpointIDs(v.NS, []struct{ field, v string }{{"id", v.ID}, {"parent", v.Parent}}, l, bad); err != nil {
		return err
	}
	if err := validateObject(v.Checkpoint, "checkpoint", true, bad); err != nil {
		return err
	}
	if err := validateObject(v.Metadata, "metadata", false, bad); err != nil {
		return err
	}
	for i, m := range v.Messages {
		if m.Payload() == nil {
			return bad(fmt.Sprintf("messages[%d].role", i), "must be user, assistant or tool, got %q", m.Role)
		}
	}
	if err := validateMessages(v.Messages, l, "messages", bad); err != nil {
		return err
	}
	if len(v.Channels) == 0 {
		return nil
	}
	var channels map[string]jsonKind
	if err := json.Unmarshal(v.Channels, &channels); err != nil || channels == nil {
		return bad("channels", "must be a JSON object of value objects")
	}
	if !utf8.Valid(v.Channels) {
		return bad("channels", "is not valid UTF-8")
	}
	for ch, val := range channels {
		if ch == "" || len(ch) > l.MaxNameLen {
			return bad("channels", "channel name %.60q must be 1..%d bytes", ch, l.MaxNameLen)
		}
		if val != '{' {
			return bad("channels["+ch+"]", "must be a JSON object (a value object)")
		}
	}
	return nil
}

// validateCheckpointWrites checks v on its own.
func validateCheckpointWrites(v CheckpointWrites, l Limits, bad badFunc) error {
	if v.Checkpoint == "" {
		return bad("checkpoint", "is required")
	}
	if v.Task == "" {
		return bad("task", "is required")
	}
	if err := validateCheckpointIDs(v.NS, []struct{ field, v string }{{"checkpoint", v.Checkpoint}, {"task", v.Task}, {"path", v.Path}}, l, bad); err != nil {
		return err
	}
	if firstByte(v.Writes) != '[' {
		return bad("writes", "must be a JSON array")
	}
	return validateJSON(v.Writes, "writes", bad)
}

// validateObject checks that raw is well-formed JSON text of an object
// (required, or empty when not).
func validateObject(raw json.RawMessage, field string, required bool, bad badFunc) error {
	if len(raw) == 0 && !required {
		return nil
	}
	if firstByte(raw) != '{' {
		return bad(field, "must be a JSON object (a value object)")
	}
	return validateJSON(raw, field, bad)
}

// jsonKind is the first byte of a JSON value ('{' for an object), which
// it decodes without copying the value.
type jsonKind byte

func (k *jsonKind) UnmarshalJSON(b []byte) error { *k = jsonKind(firstByte(b)); return nil }

// firstByte is the first byte of raw after JSON whitespace, or 0.
func firstByte(raw []byte) byte {
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return b
	}
	return 0
}
