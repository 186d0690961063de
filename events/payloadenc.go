package events

// This file writes the payloads appended most often through msgpack's
// Encoder methods, without reflection: the same bytes as the reflection
// encoder gives for the struct (a map of the fields the msgpack tags name,
// in declaration order, omitempty ones left out when empty; compact ints,
// []byte as bin). TestPayloadEncodersMatchReflection compares the two over
// every event type and the real transcripts.

import "github.com/vmihailenco/msgpack/v5"

// encodePayload writes p as enc.Encode(p) would (Forked as its forkedWire).
// Types without an encoder of their own here go through enc.Encode.
func encodePayload(enc *msgpack.Encoder, p Payload) error {
	switch v := p.(type) {
	case UserMessage:
		return encodeUser(enc, &v)
	case AssistantMessage:
		return encodeAssistant(enc, &v)
	case ToolResult:
		return encodeToolResult(enc, &v)
	case StateSet:
		if err := enc.EncodeMapLen(2); err != nil {
			return err
		}
		_ = fieldStr(enc, "key", v.Key)
		_ = enc.EncodeString("value")
		return enc.EncodeBytes(v.Value)
	case StateDeleted:
		if err := enc.EncodeMapLen(1); err != nil {
			return err
		}
		return fieldStr(enc, "key", v.Key)
	case Forked:
		return enc.Encode(forkedWireOf(v))
	}
	return enc.Encode(p)
}

// count is the number of fields of a map with n fields always present and
// one more for each true in opt (the omitempty fields that are set).
func count(n int, opt ...bool) int {
	for _, o := range opt {
		if o {
			n++
		}
	}
	return n
}

// fieldStr writes the key k and the string v. The Encoder writes to a
// bytes.Buffer, which does not fail: errors are returned for form only.
func fieldStr(enc *msgpack.Encoder, k, v string) error {
	_ = enc.EncodeString(k)
	return enc.EncodeString(v)
}

// optStr writes the key k and v when v is not empty (omitempty).
func optStr(enc *msgpack.Encoder, k, v string) {
	if v != "" {
		_ = fieldStr(enc, k, v)
	}
}

// optBytes writes the key k and v as bin when v is not empty (omitempty).
func optBytes(enc *msgpack.Encoder, k string, v []byte) {
	if len(v) > 0 {
		_ = enc.EncodeString(k)
		_ = enc.EncodeBytes(v)
	}
}

func encodeUser(enc *msgpack.Encoder, v *UserMessage) error {
	_ = enc.EncodeMapLen(count(1, v.Name != "", len(v.Metadata) > 0))
	_ = enc.EncodeString("content")
	if err := encodeContent(enc, &v.Content); err != nil {
		return err
	}
	optStr(enc, "name", v.Name)
	optBytes(enc, "metadata", v.Metadata)
	return nil
}

func encodeAssistant(enc *msgpack.Encoder, v *AssistantMessage) error {
	_ = enc.EncodeMapLen(count(1, v.Reasoning != "", len(v.ToolCalls) > 0, v.Agent != "", v.Model != "",
		v.Usage != nil, v.Name != "", len(v.Metadata) > 0, v.ReplyTo != ""))
	_ = enc.EncodeString("content")
	if err := encodeContent(enc, &v.Content); err != nil {
		return err
	}
	optStr(enc, "reasoning", v.Reasoning)
	if len(v.ToolCalls) > 0 {
		_ = enc.EncodeString("tool_calls")
		_ = enc.EncodeArrayLen(len(v.ToolCalls))
		for i := range v.ToolCalls {
			c := &v.ToolCalls[i]
			_ = enc.EncodeMapLen(3)
			_ = fieldStr(enc, "id", c.ID)
			_ = fieldStr(enc, "name", c.Name)
			_ = fieldStr(enc, "arguments", c.Arguments)
		}
	}
	optStr(enc, "agent", v.Agent)
	optStr(enc, "model", v.Model)
	if u := v.Usage; u != nil {
		_ = enc.EncodeString("usage")
		_ = enc.EncodeMapLen(count(0, u.InputTokens != 0, u.OutputTokens != 0, u.TotalTokens != 0))
		optInt(enc, "input_tokens", u.InputTokens)
		optInt(enc, "output_tokens", u.OutputTokens)
		optInt(enc, "total_tokens", u.TotalTokens)
	}
	optStr(enc, "name", v.Name)
	optBytes(enc, "metadata", v.Metadata)
	optStr(enc, "reply_to", v.ReplyTo)
	return nil
}

// optInt writes the key k and v as a compact int when v is not 0.
func optInt(enc *msgpack.Encoder, k string, v int64) {
	if v != 0 {
		_ = enc.EncodeString(k)
		_ = enc.EncodeInt(v)
	}
}

func encodeToolResult(enc *msgpack.Encoder, v *ToolResult) error {
	_ = enc.EncodeMapLen(count(2, v.Name != "", v.IsError))
	_ = fieldStr(enc, "tool_call_id", v.ToolCallID)
	optStr(enc, "name", v.Name)
	_ = enc.EncodeString("content")
	if err := encodeContent(enc, &v.Content); err != nil {
		return err
	}
	if v.IsError {
		_ = enc.EncodeString("is_error")
		_ = enc.EncodeBool(true)
	}
	return nil
}

// encodeContent is Content.EncodeMsgpack with its parts written field by
// field (Content.EncodeMsgpack passes each part to the reflection encoder).
func encodeContent(enc *msgpack.Encoder, c *Content) error {
	if c.Kind != ContentParts {
		return c.EncodeMsgpack(enc)
	}
	_ = enc.EncodeArrayLen(len(c.Parts))
	for i := range c.Parts {
		p := &c.Parts[i]
		_ = enc.EncodeMapLen(count(1, p.Text != "", p.URL != "", p.Data != "", p.MediaType != "", p.Detail != "",
			p.FileID != "", p.Filename != ""))
		_ = fieldStr(enc, "type", string(p.Type))
		optStr(enc, "text", p.Text)
		optStr(enc, "url", p.URL)
		optStr(enc, "data", p.Data)
		optStr(enc, "media_type", p.MediaType)
		optStr(enc, "detail", p.Detail)
		optStr(enc, "file_id", p.FileID)
		optStr(enc, "filename", p.Filename)
	}
	return nil
}
