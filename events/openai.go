package events

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// OpenAIMessage is a message in the OpenAI chat-completions format, the
// format of the transcripts in testdata/conversations and of
// /v1/chat/completions.
//
// On input both tool-call shapes are accepted: the API's nested
// {"id","type":"function","function":{"name","arguments"}} and the flat
// {"id","name","arguments"} of the transcript files. On output ([ToOpenAI])
// the nested API shape is written unless Flat is set.
type OpenAIMessage struct {
	Role       string           `json:"role"`
	Content    openAIContent    `json:"content"`
	Name       string           `json:"name,omitempty"`
	ToolCalls  []OpenAIToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
	// Reasoning is read from "reasoning_content" or "reasoning" and written
	// as "reasoning_content" (the field vLLM and DeepSeek use).
	Reasoning string `json:"reasoning_content,omitempty"`
}

// OpenAIToolCall is one tool call in OpenAI format.
type OpenAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	flat bool
}

// MarshalJSON writes the nested shape, or the flat one when the call was
// read flat (so transcripts round-trip in their own shape).
func (c OpenAIToolCall) MarshalJSON() ([]byte, error) {
	if c.flat {
		return marshalJSONNoEscape(struct {
			ID        string `json:"id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		}{c.ID, c.Function.Name, c.Function.Arguments})
	}
	type nested OpenAIToolCall
	n := nested(c)
	if n.Type == "" {
		n.Type = "function"
	}
	return marshalJSONNoEscape(n)
}

// UnmarshalJSON accepts the nested and the flat shape.
func (c *OpenAIToolCall) UnmarshalJSON(b []byte) error {
	var raw struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Function  *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*c = OpenAIToolCall{ID: raw.ID, Type: raw.Type}
	args := raw.Arguments
	if raw.Function != nil {
		c.Function.Name = raw.Function.Name
		args = raw.Function.Arguments
	} else {
		c.Function.Name = raw.Name
		c.flat = true
	}
	s, err := argumentsString(args)
	if err != nil {
		return fmt.Errorf("tool call %q: %w", raw.ID, err)
	}
	c.Function.Arguments = s
	return nil
}

// argumentsString accepts arguments as a JSON string (the API form) or, as
// some clients send, a JSON object, which is kept as its exact text.
func argumentsString(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	if raw[0] == '{' {
		return string(raw), nil
	}
	return "", fmt.Errorf("arguments must be a JSON string or object")
}

// openAIContent is Content in OpenAI's encoding of parts.
type openAIContent struct{ Content }

func (c openAIContent) MarshalJSON() ([]byte, error) {
	if c.Kind != ContentParts {
		return c.Content.MarshalJSON()
	}
	out := make([]map[string]any, 0, len(c.Parts))
	for _, p := range c.Parts {
		switch p.Type {
		case PartText:
			out = append(out, map[string]any{"type": "text", "text": p.Text})
		case PartImage:
			img := map[string]any{"url": p.URL}
			if p.Data != "" {
				img["url"] = "data:" + p.MediaType + ";base64," + p.Data
			}
			if p.Detail != "" {
				img["detail"] = p.Detail
			}
			out = append(out, map[string]any{"type": "image_url", "image_url": img})
		case PartFile:
			f := map[string]any{}
			if p.FileID != "" {
				f["file_id"] = p.FileID
			}
			if p.Filename != "" {
				f["filename"] = p.Filename
			}
			if p.Data != "" {
				f["file_data"] = "data:" + p.MediaType + ";base64," + p.Data
			} else if p.URL != "" {
				f["file_data"] = p.URL
			}
			out = append(out, map[string]any{"type": "file", "file": f})
		}
	}
	return marshalJSONNoEscape(out)
}

func (c *openAIContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '[' {
		return c.Content.UnmarshalJSON(b)
	}
	var raw []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL    string `json:"url"`
			Detail string `json:"detail"`
		} `json:"image_url"`
		File *struct {
			FileID   string `json:"file_id"`
			Filename string `json:"filename"`
			FileData string `json:"file_data"`
		} `json:"file"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	ps := make([]Part, 0, len(raw))
	for i, r := range raw {
		switch r.Type {
		case "text", "input_text":
			ps = append(ps, Part{Type: PartText, Text: r.Text})
		case "image_url":
			if r.ImageURL == nil {
				return fmt.Errorf("content[%d]: image_url part without image_url", i)
			}
			ps = append(ps, Part{Type: PartImage, URL: r.ImageURL.URL, Detail: r.ImageURL.Detail})
		case "file":
			if r.File == nil {
				return fmt.Errorf("content[%d]: file part without file", i)
			}
			ps = append(ps, Part{Type: PartFile, FileID: r.File.FileID, Filename: r.File.Filename, URL: r.File.FileData})
		default:
			return fmt.Errorf("content[%d]: unsupported part type %q", i, r.Type)
		}
	}
	c.Content = Content{Kind: ContentParts, Parts: ps}
	return nil
}

// UnmarshalJSON reads an OpenAI message, accepting "reasoning" as well as
// "reasoning_content".
func (m *OpenAIMessage) UnmarshalJSON(b []byte) error {
	type plain OpenAIMessage
	var aux struct {
		plain
		ReasoningAlt string `json:"reasoning"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*m = OpenAIMessage(aux.plain)
	if m.Reasoning == "" {
		m.Reasoning = aux.ReasoningAlt
	}
	return nil
}

// FromOpenAI converts an OpenAI-format message to a history [Message].
// It returns an error naming the field when the role is unknown or a tool
// message has no tool_call_id. Content is kept exactly (null stays null).
func FromOpenAI(o OpenAIMessage) (Message, error) {
	m := Message{Role: Role(o.Role), Content: o.Content.Content, Name: o.Name, Reasoning: o.Reasoning}
	switch m.Role {
	case RoleSystem, RoleUser:
	case RoleAssistant:
		for _, c := range o.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
	case RoleTool:
		if o.ToolCallID == "" {
			return Message{}, fmt.Errorf("events: tool message without tool_call_id")
		}
		m.ToolCallID = o.ToolCallID
	case "developer":
		m.Role = RoleSystem
	default:
		return Message{}, fmt.Errorf("events: message role %q is not system, developer, user, assistant or tool", o.Role)
	}
	return m, nil
}

// ToOpenAI converts a history message to OpenAI format with nested tool
// calls. Convlog-only fields (agent, model, seq, ...) are dropped; an error
// flag on a tool result is not representable and is dropped too.
func ToOpenAI(m Message) OpenAIMessage {
	o := OpenAIMessage{Role: string(m.Role), Content: openAIContent{m.Content}, Name: m.Name,
		ToolCallID: m.ToolCallID, Reasoning: m.Reasoning}
	for _, c := range m.ToolCalls {
		tc := OpenAIToolCall{ID: c.ID, Type: "function"}
		tc.Function.Name, tc.Function.Arguments = c.Name, c.Arguments
		o.ToolCalls = append(o.ToolCalls, tc)
	}
	return o
}

// ToOpenAIFlat is [ToOpenAI] with tool calls in the flat transcript shape
// {"id","name","arguments"} used by testdata/conversations and `agentd export`.
func ToOpenAIFlat(m Message) OpenAIMessage {
	o := ToOpenAI(m)
	for i := range o.ToolCalls {
		o.ToolCalls[i].flat = true
	}
	return o
}

// MarshalJSON writes the message without HTML escaping.
func (m OpenAIMessage) MarshalJSON() ([]byte, error) {
	type plain OpenAIMessage
	return marshalJSONNoEscape(plain(m))
}

// Conversation is one line of an OpenAI-format JSONL transcript file:
// {"source","id","meta","messages"}. Source, ID and Meta are optional.
type Conversation struct {
	Source   string          `json:"source,omitempty"`
	ID       string          `json:"id,omitempty"`
	Meta     json.RawMessage `json:"meta,omitempty"`
	Messages []OpenAIMessage `json:"messages"`
}

// SplitSystem returns the system prompt of a history (the content of a
// leading system message, if any) and the messages after it, converted.
// Later system messages stay in the history as system messages.
func SplitSystem(msgs []OpenAIMessage) (system *string, rest []Message, err error) {
	for i, o := range msgs {
		m, err := FromOpenAI(o)
		if err != nil {
			return nil, nil, fmt.Errorf("message %d: %w", i, err)
		}
		if i == 0 && m.Role == RoleSystem && m.Content.Kind == ContentText {
			s := m.Content.Text
			system = &s
			continue
		}
		rest = append(rest, m)
	}
	return system, rest, nil
}
