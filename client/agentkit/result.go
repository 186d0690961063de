package agentkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// InferenceResult is AgentKit's InferenceResult (AgentResult): one model
// inference of an agent and the tools it called. Read from a thread, there
// is one result per assistant message:
//
//   - Agent: the assistant message's agent name.
//   - Input: the text of the user message the turn answers (the last user
//     message before it; "" if there is none).
//   - Prompt: the initial prompt of the turn: the thread's system prompt as
//     a system message (if the thread has one), then that user message.
//     Results of the same turn share it.
//   - History: every message of the thread before the assistant message,
//     in order (it includes Prompt's user message at its place): what the
//     model saw after the system prompt. It is a slice of the thread's
//     messages shared by all results; do not modify it.
//   - Output: the assistant message itself (Content is null on a
//     tool-call-only turn; ToolCalls names the calls).
//   - ToolCalls: the tool results (role tool) answering that message's
//     calls, in the order they were appended (AgentKit's
//     ToolResultMessage[]).
//   - Raw: the provider's raw response, stored as the assistant message's
//     Metadata.
//
// Written with [History.AppendResults], only Agent, Output, ToolCalls and
// Raw are used (Input, Prompt and History are derived from the thread, and
// Seq and Time are set by the log): each Output message (role assistant)
// becomes a message.assistant event, immediately followed by the ToolCalls
// entries that answer its calls; tool results answering no call of Output
// (calls made by an earlier append) follow the result's Output. Agent is
// written on output messages that have none; Raw on the first output
// message (which must then have no Metadata of its own).
type InferenceResult struct {
	Agent     string           `json:"agent"`
	Input     string           `json:"input"`
	Prompt    []events.Message `json:"prompt"`
	History   []events.Message `json:"history"`
	Output    []events.Message `json:"output"`
	ToolCalls []events.Message `json:"toolCalls"`
	Raw       json.RawMessage  `json:"raw,omitempty"`

	// Seq is the stream sequence of the assistant message (0 for results
	// not read from a thread).
	Seq uint64 `json:"seq,omitempty"`
	// CreatedAt is the time of the assistant message.
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// UserMessage is AgentKit's userMessage: {id, content, role: "user",
// timestamp}.
type UserMessage struct {
	// ID is the event id: a canonical lower-case UUID, or empty for a new
	// UUIDv7. Appending the same id twice stores the message once.
	ID string
	// Content is text or multimodal parts; it must not be null.
	Content events.Content
	// Name is the optional participant name.
	Name string
	// Metadata is free JSON kept with the message.
	Metadata json.RawMessage
	// Timestamp is the event time (zero: now).
	Timestamp time.Time
}

func (m UserMessage) event() events.Event {
	return events.Event{ID: m.ID, Time: m.Timestamp,
		Payload: events.UserMessage{Content: m.Content, Name: m.Name, Metadata: m.Metadata}}
}

// Results maps a thread's projected history to InferenceResults (see
// [InferenceResult] for the mapping). It reads th and allocates the
// results; the messages are shared with th.
func Results(th *client.Thread) []InferenceResult {
	msgs := th.Messages
	out := []InferenceResult{}
	var system []events.Message
	if th.SystemPrompt != nil {
		system = []events.Message{{Role: events.RoleSystem, Content: events.Text(*th.SystemPrompt)}}
	}
	prompt := system
	input := ""
	cur := -1 // index in out of the result tool messages attach to
	for i, m := range msgs {
		switch m.Role {
		case events.RoleUser:
			input = m.Content.String()
			prompt = append(append(make([]events.Message, 0, len(system)+1), system...), m)
			cur = -1
		case events.RoleAssistant:
			out = append(out, InferenceResult{Agent: m.Agent, Input: input, Prompt: prompt,
				History: msgs[:i:i], Output: []events.Message{m}, ToolCalls: []events.Message{},
				Raw: m.Metadata, Seq: m.Seq, CreatedAt: m.Time})
			cur = len(out) - 1
		case events.RoleTool:
			if cur >= 0 {
				out[cur].ToolCalls = append(out[cur].ToolCalls, m)
			}
		}
	}
	return out
}

// resultEvents maps results to the events AppendResults appends.
func resultEvents(results []InferenceResult) ([]events.Event, error) {
	var evs []events.Event
	for ri, r := range results {
		used := make([]bool, len(r.ToolCalls))
		for ti, t := range r.ToolCalls {
			if t.Role != events.RoleTool {
				return nil, fmt.Errorf("%w: result %d: toolCalls[%d] has role %q, want %q", ErrInvalidResult, ri, ti, t.Role, events.RoleTool)
			}
		}
		for oi, o := range r.Output {
			if o.Role != events.RoleAssistant {
				return nil, fmt.Errorf("%w: result %d: output[%d] has role %q, want %q", ErrInvalidResult, ri, oi, o.Role, events.RoleAssistant)
			}
			a := o.Payload().(events.AssistantMessage)
			if a.Agent == "" {
				a.Agent = r.Agent
			}
			if oi == 0 && len(r.Raw) > 0 {
				if len(a.Metadata) > 0 && !bytes.Equal(a.Metadata, r.Raw) {
					return nil, fmt.Errorf("%w: result %d: both raw and output[0].metadata are set", ErrInvalidResult, ri)
				}
				a.Metadata = r.Raw
			}
			evs = append(evs, events.Event{Payload: a})
			for _, c := range a.ToolCalls {
				for ti, t := range r.ToolCalls {
					if !used[ti] && t.ToolCallID == c.ID {
						used[ti] = true
						evs = append(evs, events.Event{Payload: t.Payload()})
						break
					}
				}
			}
		}
		for ti, t := range r.ToolCalls {
			if !used[ti] {
				evs = append(evs, events.Event{Payload: t.Payload()})
			}
		}
	}
	return evs, nil
}
