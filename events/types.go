package events

import "encoding/json"

// Type names an event type. It is carried in the envelope and in the NATS
// header [HeaderType].
type Type string

// Event types. The seed each one serves is named in its payload's doc.
const (
	TypeThreadCreated    Type = "thread.created"
	TypeThreadUpdated    Type = "thread.updated"
	TypeUserMessage      Type = "message.user"
	TypeAssistantMessage Type = "message.assistant"
	TypeToolResult       Type = "tool.result"
	TypeReset            Type = "thread.reset"
	TypeRestore          Type = "thread.restored"
	TypeCompaction       Type = "thread.compacted"
	TypeStateSet         Type = "state.set"
	TypeStateDeleted     Type = "state.deleted"
	TypeForked           Type = "thread.forked"
	TypeDeleted          Type = "thread.deleted"
	TypeUndeleted        Type = "thread.undeleted"
	TypeErased           Type = "thread.erased"
	TypeRedacted         Type = "event.redacted"
	TypeCheckpointSaved  Type = "checkpoint.saved"
	TypeCheckpointWrites Type = "checkpoint.writes"
)

// AllTypes lists every event type this version knows, in a stable order
// (the registry's, see [Registry]).
var AllTypes = typesOf(registry)

// Payload is the typed body of an event. Every payload type of this package
// implements it; EventType names the [Type] it is carried under.
type Payload interface {
	EventType() Type
}

// ReplyMode says whether agent workers answer user messages of a thread.
type ReplyMode string

// Reply modes.
const (
	// RepliesAuto (also the empty value when the thread has an agent): every
	// user message is answered by the thread's agent.
	RepliesAuto ReplyMode = "auto"
	// RepliesOff: the thread is a record (e.g. imported history); no worker
	// answers it.
	RepliesOff ReplyMode = "off"
)

// PendingPolicy is what the fold does with a user or assistant message that
// arrives while tool calls are still pending (docs/design.md invariant 5).
type PendingPolicy string

// Pending policies.
const (
	// PendingReject (the default, also the empty value): the message is
	// rejected; writers using client/ get the error synchronously.
	PendingReject PendingPolicy = "reject"
	// PendingCancel: each pending call is closed with a synthetic tool result
	// (IsError true, content [CancelledContent]) placed before the message,
	// so the history stays valid for chat APIs. A later real result for a
	// cancelled call is rejected.
	PendingCancel PendingPolicy = "cancel"
)

// CancelledContent is the content of the synthetic tool result that
// [PendingCancel] inserts.
const CancelledContent = "cancelled: the conversation moved on before this tool call was answered"

// ThreadCreated is the first event of a thread. Seeds: AgentKit createThread
// (thread id precedence), AG2B (system prompt kept apart from history),
// Agenticore (owner/user scoping).
type ThreadCreated struct {
	// Owner is the user the thread belongs to (optional).
	Owner string `msgpack:"owner,omitempty" json:"owner,omitempty"`
	// Agent is the name of the agent that answers the thread (optional).
	Agent string `msgpack:"agent,omitempty" json:"agent,omitempty"`
	// SystemPrompt, when set, is kept apart from the message history.
	SystemPrompt *string `msgpack:"system_prompt,omitempty" json:"system_prompt,omitempty"`
	// Title is a human-readable title (optional).
	Title string `msgpack:"title,omitempty" json:"title,omitempty"`
	// Metadata is free string metadata; List filters on it.
	Metadata map[string]string `msgpack:"metadata,omitempty" json:"metadata,omitempty"`
	// Replies says whether workers answer the thread; "" means auto.
	Replies ReplyMode `msgpack:"replies,omitempty" json:"replies,omitempty"`
	// PendingPolicy is this thread's policy; "" means reject.
	PendingPolicy PendingPolicy `msgpack:"pending_policy,omitempty" json:"pending_policy,omitempty"`
	// ExternalID is the id the thread was created under when that was not
	// a valid thread id (any UTF-8 string of up to [MaxExternalIDLen]
	// bytes, as AgentKit and LangGraph allow): the thread id is
	// [ThreadIDFor] of it. "" when the thread was created under its own
	// id. The fold refuses a value that does not map to the thread's id.
	ExternalID string `msgpack:"external_id,omitempty" json:"external_id,omitempty"`
}

// EventType implements Payload.
func (ThreadCreated) EventType() Type { return TypeThreadCreated }

// ThreadUpdated changes thread attributes. Metadata keys with an empty value
// are removed; a nil field leaves the attribute unchanged.
type ThreadUpdated struct {
	Title        *string           `msgpack:"title,omitempty" json:"title,omitempty"`
	SystemPrompt *string           `msgpack:"system_prompt,omitempty" json:"system_prompt,omitempty"`
	Metadata     map[string]string `msgpack:"metadata,omitempty" json:"metadata,omitempty"`
	Replies      ReplyMode         `msgpack:"replies,omitempty" json:"replies,omitempty"`
	Agent        *string           `msgpack:"agent,omitempty" json:"agent,omitempty"`
}

// EventType implements Payload.
func (ThreadUpdated) EventType() Type { return TypeThreadUpdated }

// UserMessage is a message from the user (or a simulated user).
type UserMessage struct {
	Content Content `msgpack:"content" json:"content"`
	// Name is the optional participant name (OpenAI "name").
	Name     string          `msgpack:"name,omitempty" json:"name,omitempty"`
	Metadata json.RawMessage `msgpack:"metadata,omitempty" json:"metadata,omitempty"`
}

// EventType implements Payload.
func (UserMessage) EventType() Type { return TypeUserMessage }

// ToolCall is one tool invocation requested by a model. Arguments is the raw
// JSON text the model sent, kept byte for byte.
type ToolCall struct {
	ID        string `msgpack:"id" json:"id"`
	Name      string `msgpack:"name" json:"name"`
	Arguments string `msgpack:"arguments" json:"arguments"`
}

// Usage is token accounting reported by a model provider.
type Usage struct {
	InputTokens  int64 `msgpack:"input_tokens,omitempty" json:"input_tokens,omitempty"`
	OutputTokens int64 `msgpack:"output_tokens,omitempty" json:"output_tokens,omitempty"`
	TotalTokens  int64 `msgpack:"total_tokens,omitempty" json:"total_tokens,omitempty"`
}

// AssistantMessage is one model turn. Seeds: AG2B AssistantMessage (content,
// reasoning, calls, metadata), AgentKit InferenceResult (agent, raw).
type AssistantMessage struct {
	Content   Content    `msgpack:"content" json:"content"`
	Reasoning string     `msgpack:"reasoning,omitempty" json:"reasoning,omitempty"`
	ToolCalls []ToolCall `msgpack:"tool_calls,omitempty" json:"tool_calls,omitempty"`
	// Agent is the name of the agent that produced the turn.
	Agent string `msgpack:"agent,omitempty" json:"agent,omitempty"`
	Model string `msgpack:"model,omitempty" json:"model,omitempty"`
	Usage *Usage `msgpack:"usage,omitempty" json:"usage,omitempty"`
	// Name is the optional participant name (OpenAI "name").
	Name string `msgpack:"name,omitempty" json:"name,omitempty"`
	// Metadata is free provider data (a JSON object), preserved as is.
	Metadata json.RawMessage `msgpack:"metadata,omitempty" json:"metadata,omitempty"`
	// ReplyTo is the event id of the user message this turn answers (set by
	// agent workers; used for exactly-once answers).
	ReplyTo string `msgpack:"reply_to,omitempty" json:"reply_to,omitempty"`
}

// EventType implements Payload.
func (AssistantMessage) EventType() Type { return TypeAssistantMessage }

// ToolResult answers one pending tool call (docs/design.md invariant 5).
type ToolResult struct {
	ToolCallID string `msgpack:"tool_call_id" json:"tool_call_id"`
	// Name is the tool name; "" when the source did not record it.
	Name    string  `msgpack:"name,omitempty" json:"name,omitempty"`
	Content Content `msgpack:"content" json:"content"`
	IsError bool    `msgpack:"is_error,omitempty" json:"is_error,omitempty"`
}

// EventType implements Payload.
func (ToolResult) EventType() Type { return TypeToolResult }

// Reset clears the history (AG2B reset). State and metadata stay.
type Reset struct {
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// EventType implements Payload.
func (Reset) EventType() Type { return TypeReset }

// Restore replaces the whole history (AG2B restore, DeepAgents save of a
// rewritten history). Messages must form a valid history on their own.
type Restore struct {
	Messages []Message `msgpack:"messages" json:"messages"`
	Reason   string    `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// EventType implements Payload.
func (Restore) EventType() Type { return TypeRestore }

// Compaction replaces every message at stream sequence <= UpToSeq by one
// summary message (DeepAgents SummarizationMiddleware). Role is "user"
// (default) or "assistant". It is rejected if it would separate a tool call
// from its result.
type Compaction struct {
	UpToSeq uint64  `msgpack:"up_to_seq" json:"up_to_seq"`
	Summary Content `msgpack:"summary" json:"summary"`
	Role    Role    `msgpack:"role,omitempty" json:"role,omitempty"`
}

// EventType implements Payload.
func (Compaction) EventType() Type { return TypeCompaction }

// StateSet sets one key of the thread's key-value state (AgentKit state.kv).
// Value is any JSON value.
type StateSet struct {
	Key   string          `msgpack:"key" json:"key"`
	Value json.RawMessage `msgpack:"value" json:"value"`
}

// EventType implements Payload.
func (StateSet) EventType() Type { return TypeStateSet }

// StateDeleted deletes one key of the thread's key-value state.
type StateDeleted struct {
	Key string `msgpack:"key" json:"key"`
}

// EventType implements Payload.
func (StateDeleted) EventType() Type { return TypeStateDeleted }

// Forked is the first event of a thread forked from another thread at a
// sequence. A copy fork carries the source's projected history, state and
// thread attributes as of that sequence, so the fork reads without the
// source (and survives the source's erasure); it must fit in one event. A
// fork by reference (ByReference) carries no history or state: readers
// take them from the source as of SourceSeq (fold.ErrNeedParent,
// fold.ApplyFork), so a fork of any length is one small event, and the
// source's erasure takes the inherited history from the fork too.
type Forked struct {
	SourceTenant string                     `msgpack:"source_tenant" json:"source_tenant"`
	SourceThread string                     `msgpack:"source_thread" json:"source_thread"`
	SourceSeq    uint64                     `msgpack:"source_seq" json:"source_seq"`
	Created      ThreadCreated              `msgpack:"created" json:"created"`
	Messages     []Message                  `msgpack:"messages" json:"messages"`
	State        map[string]json.RawMessage `msgpack:"state,omitempty" json:"state,omitempty"`
	// ByReference: the history and state are the source's as of
	// SourceSeq, not in this event (Messages and State must be empty).
	ByReference bool `msgpack:"by_reference,omitempty" json:"by_reference,omitempty"`
}

// EventType implements Payload.
func (Forked) EventType() Type { return TypeForked }

// Deleted soft-deletes a thread: hidden from List and Get, kept for audit,
// reversible with [Undeleted]. Appends other than Undeleted are rejected.
type Deleted struct {
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// EventType implements Payload.
func (Deleted) EventType() Type { return TypeDeleted }

// Undeleted reverses a soft delete.
type Undeleted struct {
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// EventType implements Payload.
func (Undeleted) EventType() Type { return TypeUndeleted }

// Erased is the marker left on a thread's subject after its events were
// purged. It names what was removed; every later event is rejected.
type Erased struct {
	RemovedEvents uint64 `msgpack:"removed_events" json:"removed_events"`
	LastSeq       uint64 `msgpack:"last_seq" json:"last_seq"`
	Reason        string `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// EventType implements Payload.
func (Erased) EventType() Type { return TypeErased }

// Redacted records that content of one earlier event of the thread was
// made unreadable (a GDPR request about one message, a secret leaked into
// a tool result). It is written by client.Redact only, after
// the event's key was destroyed and its content replaced by
// [RedactedText] in the named fields; it is never sealed, so an auditor
// reads it without keys. The stored bytes of the redacted event do not
// change (its audit leaf stays valid).
type Redacted struct {
	// Seq is the stream sequence of the redacted event; EventID its id.
	// Both are zero when UpToSeq is set.
	Seq     uint64 `msgpack:"seq" json:"seq"`
	EventID string `msgpack:"event_id" json:"event_id"`
	// UpToSeq, when set, redacts every event of the thread with content
	// up to and including that sequence (a retention policy keeping only
	// recent events; the thread.compacted summary in front of the history
	// says what was removed).
	UpToSeq uint64 `msgpack:"up_to_seq,omitempty" json:"up_to_seq,omitempty"`
	// Fields names the payload fields redacted ([RedactableFields]); all
	// of the event's content fields when empty.
	Fields []string `msgpack:"fields,omitempty" json:"fields,omitempty"`
	// Reason is why (stored in the clear: no personal data here).
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// EventType implements Payload.
func (Redacted) EventType() Type { return TypeRedacted }

// RedactedText replaces redacted text.
const RedactedText = "[redacted]"

// knownType reports whether t is one of the event types of this version.
func knownType(t Type) bool {
	_, ok := byType[t]
	return ok
}

// newPayload returns a pointer to a zero payload of type t, or nil.
func newPayload(t Type) Payload {
	if ti, ok := byType[t]; ok {
		return ti.new()
	}
	return nil
}
