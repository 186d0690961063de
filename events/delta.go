package events

// Delta is one live, non-persistent piece of an assistant turn being
// generated, published as JSON on the thread's delta subject
// ([Subjects.Delta]) so streaming UIs can show tokens as they come. The
// durable assistant message event that follows is the record; deltas may be
// dropped (slow readers skip them) and are never replayed.
type Delta struct {
	// ReplyTo is the event id of the user message being answered.
	ReplyTo string `json:"reply_to"`
	// Step is the model call within the turn (0-based).
	Step int `json:"step"`
	// Agent producing the turn.
	Agent string `json:"agent,omitempty"`
	// Content and Reasoning are text pieces to append.
	Content   string `json:"content,omitempty"`
	Reasoning string `json:"reasoning,omitempty"`
	// ToolCall is a piece of a tool call being generated.
	ToolCall *ToolCallDelta `json:"tool_call,omitempty"`
	// Done marks the end of the step's stream.
	Done bool `json:"done,omitempty"`
}

// ToolCallDelta is a piece of a streamed tool call: Index identifies the call
// within the step; ID and Name come once; Arguments pieces concatenate.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}
