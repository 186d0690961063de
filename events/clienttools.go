package events

import "encoding/json"

// ClientToolsKey is the member of a user message's Metadata that carries
// the tools the client offered with that message (OpenAI "tools" of a
// chat request): functions the client runs itself. An agent may call them;
// its worker does not run them but leaves the calls pending, and the
// client appends their results (convlog's chat endpoint answers with
// finish_reason "tool_calls").
const ClientToolsKey = "convlog_client_tools"

// ClientTool is one tool a client offers: an OpenAI function tool's name,
// description and JSON Schema parameters.
type ClientTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ClientToolsOf returns the client tools a user message's Metadata
// carries (nil when none, or when Metadata is not a JSON object).
func ClientToolsOf(metadata json.RawMessage) []ClientTool {
	if len(metadata) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return nil
	}
	var ts []ClientTool
	if json.Unmarshal(m[ClientToolsKey], &ts) != nil {
		return nil
	}
	return ts
}

// WithClientTools returns metadata (a JSON object, or empty) with tools
// set under [ClientToolsKey]. It returns metadata unchanged when tools is
// empty, and an error when metadata is not a JSON object.
func WithClientTools(metadata json.RawMessage, tools []ClientTool) (json.RawMessage, error) {
	if len(tools) == 0 {
		return metadata, nil
	}
	m := map[string]json.RawMessage{}
	if len(metadata) > 0 {
		if err := json.Unmarshal(metadata, &m); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return nil, err
	}
	m[ClientToolsKey] = b
	return json.Marshal(m)
}
