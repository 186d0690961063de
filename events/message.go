package events

import (
	"encoding/json"
	"time"
)

// Role is the author of a [Message].
type Role string

// Roles of the projected history. The system prompt is not a message: it is
// kept on the thread (AG2B), so histories hold only these four roles, and
// "system" only when a writer restores one explicitly.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a thread's history: what a chat API receives.
// It is used in [Restore] and [Forked] payloads and, with Seq, EventID and
// Time filled in, as the projected message that readers get.
//
// By role:
//   - user:      Content, optional Name.
//   - assistant: Content (null on a tool-call-only turn), Reasoning,
//     ToolCalls, Agent, Model, Usage, Metadata, optional Name.
//   - tool:      ToolCallID, Name (optional), Content, IsError.
//   - system:    Content.
type Message struct {
	Role       Role            `msgpack:"role" json:"role"`
	Content    Content         `msgpack:"content" json:"content"`
	Name       string          `msgpack:"name,omitempty" json:"name,omitempty"`
	Reasoning  string          `msgpack:"reasoning,omitempty" json:"reasoning,omitempty"`
	ToolCalls  []ToolCall      `msgpack:"tool_calls,omitempty" json:"tool_calls,omitempty"`
	ToolCallID string          `msgpack:"tool_call_id,omitempty" json:"tool_call_id,omitempty"`
	IsError    bool            `msgpack:"is_error,omitempty" json:"is_error,omitempty"`
	Agent      string          `msgpack:"agent,omitempty" json:"agent,omitempty"`
	Model      string          `msgpack:"model,omitempty" json:"model,omitempty"`
	Usage      *Usage          `msgpack:"usage,omitempty" json:"usage,omitempty"`
	Metadata   json.RawMessage `msgpack:"metadata,omitempty" json:"metadata,omitempty"`

	// Seq is the stream sequence of the event that produced the message
	// (0 inside Restore/Forked payloads and for synthetic messages).
	Seq uint64 `msgpack:"seq,omitempty" json:"seq,omitempty"`
	// EventID is the id of the event that produced the message.
	EventID string `msgpack:"event_id,omitempty" json:"event_id,omitempty"`
	// Time is the event time of the message (UTC).
	Time time.Time `msgpack:"time,omitempty" json:"time,omitzero"`
	// Synthetic marks a message the fold inserted (a cancelled tool result, a
	// compaction summary), not one a writer appended.
	Synthetic bool `msgpack:"synthetic,omitempty" json:"synthetic,omitempty"`
}

// Payload returns the event payload that appends m to a thread: a
// [UserMessage], [AssistantMessage] or [ToolResult]. It returns nil for a
// system message or an unknown role.
func (m Message) Payload() Payload {
	switch m.Role {
	case RoleUser:
		return UserMessage{Content: m.Content, Name: m.Name, Metadata: m.Metadata}
	case RoleAssistant:
		return AssistantMessage{Content: m.Content, Reasoning: m.Reasoning, ToolCalls: m.ToolCalls,
			Agent: m.Agent, Model: m.Model, Usage: m.Usage, Name: m.Name, Metadata: m.Metadata}
	case RoleTool:
		return ToolResult{ToolCallID: m.ToolCallID, Name: m.Name, Content: m.Content, IsError: m.IsError}
	}
	return nil
}

// MessageOf returns the history message a message payload becomes, and
// false for payloads that are not messages.
func MessageOf(p Payload) (Message, bool) {
	switch v := p.(type) {
	case UserMessage:
		return Message{Role: RoleUser, Content: v.Content, Name: v.Name, Metadata: v.Metadata}, true
	case AssistantMessage:
		return Message{Role: RoleAssistant, Content: v.Content, Reasoning: v.Reasoning, ToolCalls: v.ToolCalls,
			Agent: v.Agent, Model: v.Model, Usage: v.Usage, Name: v.Name, Metadata: v.Metadata}, true
	case ToolResult:
		return Message{Role: RoleTool, ToolCallID: v.ToolCallID, Name: v.Name, Content: v.Content, IsError: v.IsError}, true
	}
	return Message{}, false
}
