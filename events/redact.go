package events

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// RedactableFields are the payload fields [RedactPayload] can replace:
//
//   - "content": the content of message.user, message.assistant and
//     tool.result (a text of [RedactedText]; a null assistant content stays
//     null);
//   - "reasoning": message.assistant's reasoning;
//   - "tool_calls.arguments": every tool call's arguments of
//     message.assistant ("{}"; ids and names stay, so the fold pairs
//     results as before);
//   - "metadata": the metadata of messages and of thread.created and
//     thread.updated (removed);
//   - "value": state.set's value (the JSON string "[redacted]");
//   - "title", "system_prompt": of thread.created and thread.updated.
//
// Histories carried by thread.restored and thread.forked (a copy fork)
// and thread.compacted's summary are redacted message by message with the
// same rules ("content" also covers the summary; "value" a fork's state;
// a fork's created attributes as thread.created's).
var RedactableFields = []string{"content", "reasoning", "tool_calls.arguments", "metadata", "value", "title", "system_prompt"}

// RedactPayload returns p with fields (all of p's redactable fields when
// empty) replaced as [RedactableFields] says, and the fields it replaced.
// The result has the same type, tool call ids and structure as p, so the
// fold decides on it exactly as on p. Errors name a field p's type does
// not have or a type with no redactable content.
func RedactPayload(p Payload, fields []string) (Payload, []string, error) {
	fields, err := redactFields(p, fields)
	if err != nil {
		return nil, nil, err
	}
	on := func(f string) bool { return slices.Contains(fields, f) }
	text := Text(RedactedText)
	switch v := p.(type) {
	case UserMessage:
		if on("content") {
			v.Content = text
		}
		if on("metadata") {
			v.Metadata = nil
		}
		p = v
	case AssistantMessage:
		redactAssistant(on, &v.Content, &v.Reasoning, &v.ToolCalls, &v.Metadata)
		p = v
	case ToolResult:
		if on("content") {
			v.Content = text
		}
		p = v
	case StateSet:
		if on("value") {
			v.Value = json.RawMessage(`"` + RedactedText + `"`)
		}
		p = v
	case ThreadCreated:
		p = redactCreated(v, on)
	case ThreadUpdated:
		p = redactUpdated(v, on)
	case Restore:
		v.Messages = redactMessages(v.Messages, on)
		p = v
	case Compaction:
		if on("content") {
			v.Summary = text
		}
		p = v
	case Forked:
		p = redactForked(v, on)
	}
	return p, fields, nil
}

// redactFields returns the fields to redact in p: fields, or all of p's
// redactable fields when fields is empty. It returns an error if p's type
// has no redactable content or fields names one p's type does not have.
func redactFields(p Payload, fields []string) ([]string, error) {
	has := typeFields(p)
	if len(has) == 0 {
		return nil, fmt.Errorf("events: a %s event has no redactable content", p.EventType())
	}
	if len(fields) == 0 {
		return has, nil
	}
	for _, f := range fields {
		if !slices.Contains(has, f) {
			return nil, fmt.Errorf("events: a %s event has no redactable field %q (it has %s)", p.EventType(), f, strings.Join(has, ", "))
		}
	}
	return fields, nil
}

// redactCreated returns v with the fields on() names redacted: a title
// that is set, a system prompt that is set, the metadata. It never fails.
func redactCreated(v ThreadCreated, on func(string) bool) ThreadCreated {
	redacted := RedactedText
	if on("title") && v.Title != "" {
		v.Title = RedactedText
	}
	if on("system_prompt") && v.SystemPrompt != nil {
		v.SystemPrompt = &redacted
	}
	if on("metadata") {
		v.Metadata = nil
	}
	return v
}

// redactUpdated returns v with the fields on() names redacted: a title
// that is changed, a system prompt that is changed, the metadata. It never
// fails.
func redactUpdated(v ThreadUpdated, on func(string) bool) ThreadUpdated {
	redacted := RedactedText
	if on("title") && v.Title != nil {
		v.Title = &redacted
	}
	if on("system_prompt") && v.SystemPrompt != nil {
		v.SystemPrompt = &redacted
	}
	if on("metadata") {
		v.Metadata = nil
	}
	return v
}

// redactForked returns v with the fields on() names redacted in its copied
// history (as for the message events), every value of its copied state
// ("value"), and its created attributes (as for thread.created). The maps
// and slices of v are copied, never changed. It never fails.
func redactForked(v Forked, on func(string) bool) Forked {
	v.Messages = redactMessages(v.Messages, on)
	if on("value") && len(v.State) > 0 {
		st := make(map[string]json.RawMessage, len(v.State))
		for k := range v.State {
			st[k] = json.RawMessage(`"` + RedactedText + `"`)
		}
		v.State = st
	}
	if on("title") || on("system_prompt") || on("metadata") {
		v.Created = redactCreated(v.Created, on)
	}
	return v
}

// redactMessages returns a copy of ms with the fields on() names
// redacted in every message, as for the message events.
func redactMessages(ms []Message, on func(string) bool) []Message {
	out := slices.Clone(ms)
	for i := range out {
		m := &out[i]
		redactAssistant(on, &m.Content, &m.Reasoning, &m.ToolCalls, &m.Metadata)
	}
	return out
}

// redactAssistant redacts, in place, the fields on() names among those
// of an assistant message (the payload, or a message of a history): a
// content that is not null, a reasoning that is set, every tool call's
// arguments (in a copy of the calls: ids and names stay), the metadata.
func redactAssistant(on func(string) bool, content *Content, reasoning *string, calls *[]ToolCall, metadata *json.RawMessage) {
	if on("content") && !content.IsNull() {
		*content = Text(RedactedText)
	}
	if on("reasoning") && *reasoning != "" {
		*reasoning = RedactedText
	}
	if on("tool_calls.arguments") && len(*calls) > 0 {
		c := slices.Clone(*calls)
		for i := range c {
			c[i].Arguments = "{}"
		}
		*calls = c
	}
	if on("metadata") {
		*metadata = nil
	}
}

// HasContent reports whether events of type t carry content
// [RedactPayload] can replace (false for an unknown type).
func HasContent(t Type) bool {
	ti, ok := byType[t]
	return ok && len(typeFields(ti.Zero())) > 0
}

// typeFields lists the redactable fields of p's type.
func typeFields(p Payload) []string {
	switch p.(type) {
	case UserMessage:
		return []string{"content", "metadata"}
	case AssistantMessage:
		return []string{"content", "reasoning", "tool_calls.arguments", "metadata"}
	case ToolResult:
		return []string{"content"}
	case StateSet:
		return []string{"value"}
	case ThreadCreated, ThreadUpdated:
		return []string{"title", "system_prompt", "metadata"}
	case Restore:
		return []string{"content", "reasoning", "tool_calls.arguments", "metadata"}
	case Compaction:
		return []string{"content"}
	case Forked:
		return []string{"content", "reasoning", "tool_calls.arguments", "metadata", "value", "title", "system_prompt"}
	}
	return nil
}
