// Package recording holds a recorded conversation and finds where a live
// history stands in it. It is shared by the replay model (agent/model) and
// the replay tool runner (agent/tools).
//
// # Matching rule
//
// System messages are ignored on both sides: the system prompt belongs to
// the agent, not to the match. The remaining history messages must equal the
// recording's remaining messages one for one, in order, from the start:
//
//   - same role;
//   - user: the same text ([events.Content.String]);
//   - assistant: the same text and the same tool calls (id, name and
//     arguments byte for byte); reasoning, agent, model and usage are not
//     compared;
//   - tool: the same tool_call_id; the content is not compared, so live
//     tools may answer differently from the recording.
//
// Matching is by position, never by call id alone: recorded threads reuse
// call ids (see testdata/conversations/README.md).
package recording

import (
	"fmt"

	"github.com/convlog/convlog/events"
)

// Recording is a recorded conversation without its system messages.
// It is immutable after [New] and safe for concurrent use.
type Recording struct {
	// ID names the recording in errors (the conversation id, or "").
	ID string
	// Messages are the recorded messages, system messages removed.
	Messages []events.Message
	// Index maps Messages[i] to its index in the original conversation.
	Index []int
}

// New converts a conversation. It returns an error naming the message
// index when a message cannot be converted (see [events.FromOpenAI]).
func New(conv events.Conversation) (*Recording, error) {
	r := &Recording{ID: conv.ID}
	for i, o := range conv.Messages {
		m, err := events.FromOpenAI(o)
		if err != nil {
			return nil, fmt.Errorf("recording %q: message %d: %w", conv.ID, i, err)
		}
		if m.Role == events.RoleSystem {
			continue
		}
		r.Messages = append(r.Messages, m)
		r.Index = append(r.Index, i)
	}
	return r, nil
}

// Mismatch says where a history left the recording. HistoryIndex is the
// index in the history as given (system messages included); RecordingIndex
// is the index in the original conversation, or -1 past its end.
type Mismatch struct {
	HistoryIndex   int
	RecordingIndex int
	Reason         string
}

// Error implements error.
func (m *Mismatch) Error() string {
	if m.RecordingIndex < 0 {
		return fmt.Sprintf("history message %d: %s", m.HistoryIndex, m.Reason)
	}
	return fmt.Sprintf("history message %d (recording message %d): %s", m.HistoryIndex, m.RecordingIndex, m.Reason)
}

// Match checks history against the recording (see the package doc) and
// returns the position in r.Messages that follows it: the number of
// non-system history messages. It returns a *Mismatch when the history
// differs or is longer than the recording.
func (r *Recording) Match(history []events.Message) (int, error) {
	pos := 0
	for hi, h := range history {
		if h.Role == events.RoleSystem {
			continue
		}
		if pos >= len(r.Messages) {
			return 0, &Mismatch{HistoryIndex: hi, RecordingIndex: -1,
				Reason: fmt.Sprintf("the recording ends after %d messages (system messages not counted), the history goes on", len(r.Messages))}
		}
		if reason := differ(h, r.Messages[pos]); reason != "" {
			if h.Synthetic {
				reason += " (the history message is synthetic: the fold inserted it)"
			}
			return 0, &Mismatch{HistoryIndex: hi, RecordingIndex: r.Index[pos], Reason: reason}
		}
		pos++
	}
	return pos, nil
}

// OriginalIndex returns the index in the original conversation of
// r.Messages[pos], or -1 when pos is past the end.
func (r *Recording) OriginalIndex(pos int) int {
	if pos < 0 || pos >= len(r.Index) {
		return -1
	}
	return r.Index[pos]
}

// differ returns why h does not match the recorded message m, or "".
func differ(h, m events.Message) string {
	if h.Role != m.Role {
		return fmt.Sprintf("the history has a message with role %q, the recording one with role %q", h.Role, m.Role)
	}
	switch h.Role {
	case events.RoleUser:
		if h.Content.String() != m.Content.String() {
			return fmt.Sprintf("user text differs: history %.60q, recording %.60q", h.Content.String(), m.Content.String())
		}
	case events.RoleAssistant:
		if h.Content.String() != m.Content.String() {
			return fmt.Sprintf("assistant text differs: history %.60q, recording %.60q", h.Content.String(), m.Content.String())
		}
		if len(h.ToolCalls) != len(m.ToolCalls) {
			return fmt.Sprintf("the history's assistant message has %d tool calls, the recording's %d", len(h.ToolCalls), len(m.ToolCalls))
		}
		for i := range h.ToolCalls {
			if h.ToolCalls[i] != m.ToolCalls[i] {
				return fmt.Sprintf("tool call %d differs: history %s(%q) id %q, recording %s(%q) id %q", i,
					h.ToolCalls[i].Name, h.ToolCalls[i].Arguments, h.ToolCalls[i].ID,
					m.ToolCalls[i].Name, m.ToolCalls[i].Arguments, m.ToolCalls[i].ID)
			}
		}
	case events.RoleTool:
		if h.ToolCallID != m.ToolCallID {
			return fmt.Sprintf("tool result answers call %q, the recording's answers %q", h.ToolCallID, m.ToolCallID)
		}
	}
	return ""
}
