package events

import (
	"fmt"
	"reflect"
)

// The decoder's type switches and payload readers (decode_gen.go), the
// type lists of schemas/envelope.json and of the HTTP API's Event schema,
// the table of schemas/README.md and audit's type names are generated
// from the registry; TestGeneratedFilesAreUpToDate fails when one is stale.
//go:generate go run -tags convlog_nogen ./internal/gen/cmd/eventsgen

// TypeInfo is one event type's entry in the registry: adding an event type
// is one entry here, its payload type (with EventType), its fold case in
// package fold, its schema in schemas/payloads and its test events in
// internal/eventfixtures
// (TestEveryRegisteredTypeIsEverywhere in the repository root fails when
// one of them is missing), then "go generate ./events/".
type TypeInfo struct {
	// Type is the wire name.
	Type Type
	// InAPI is true when the HTTP API's Event schema (openapi.json) lists
	// the type: false only for types written by a dedicated route and
	// never shown as an event (thread.erased).
	InAPI bool
	// Renumberable is true when a writer may fold the event into a window
	// before it knows its stored sequence (see fold.State.Renumber).
	Renumberable bool

	goType reflect.Type
	new    func() Payload
	deref  func(Payload) Payload
}

// register is the registry entry of payload type T under t.
func register[T Payload](t Type, inAPI, renumberable bool) TypeInfo {
	return TypeInfo{Type: t, InAPI: inAPI, Renumberable: renumberable,
		goType: reflect.TypeFor[T](),
		new:    func() Payload { return any(new(T)).(Payload) },
		deref:  func(p Payload) Payload { return *any(p).(*T) },
	}
}

// registry lists every event type of this version, in AllTypes order.
var registry = []TypeInfo{
	register[ThreadCreated](TypeThreadCreated, true, false),
	register[ThreadUpdated](TypeThreadUpdated, true, true),
	register[UserMessage](TypeUserMessage, true, true),
	register[AssistantMessage](TypeAssistantMessage, true, true),
	register[ToolResult](TypeToolResult, true, true),
	register[Reset](TypeReset, true, false),
	register[Restore](TypeRestore, true, false),
	register[Compaction](TypeCompaction, true, false),
	register[StateSet](TypeStateSet, true, true),
	register[StateDeleted](TypeStateDeleted, true, true),
	register[Forked](TypeForked, true, false),
	register[Deleted](TypeDeleted, true, false),
	register[Undeleted](TypeUndeleted, true, false),
	register[Erased](TypeErased, false, false),
	register[Redacted](TypeRedacted, true, false),
	register[CheckpointSaved](TypeCheckpointSaved, true, true),
	register[CheckpointWrites](TypeCheckpointWrites, true, true),
}

// byType indexes registry.
var byType = func() map[Type]*TypeInfo {
	m := make(map[Type]*TypeInfo, len(registry))
	for i := range registry {
		ti := &registry[i]
		if got := ti.new().EventType(); got != ti.Type {
			panic(fmt.Sprintf("events: registry entry %s holds a payload of type %s", ti.Type, got))
		}
		m[ti.Type] = ti
	}
	return m
}()

// Registry returns the entries of every event type of this version, in
// AllTypes order. The slice is a copy; the entries are read-only.
func Registry() []TypeInfo { return append([]TypeInfo(nil), registry...) }

// Lookup returns the registry entry of t, or false for a type this version
// does not know.
func Lookup(t Type) (TypeInfo, bool) {
	ti, ok := byType[t]
	if !ok {
		return TypeInfo{}, false
	}
	return *ti, true
}

// Zero returns the zero payload of the entry's type (a value, as decoded
// events carry it).
func (ti TypeInfo) Zero() Payload { return ti.deref(ti.new()) }

// typesOf lists the types of entries, in order.
func typesOf(entries []TypeInfo) []Type {
	out := make([]Type, len(entries))
	for i, e := range entries {
		out[i] = e.Type
	}
	return out
}
