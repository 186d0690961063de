package model

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/shared"

	"github.com/convlog/convlog/events"
)

// openAIMessages converts the system prompt and history to chat-completions
// messages: the system prompt first; user content as a string or as parts
// (text, image_url, file); assistant turns with their tool calls (null
// content is omitted; a turn with neither content nor calls gets "");
// tool results with their tool_call_id. Reasoning and convlog-only fields
// are not sent; a tool result's error flag is not representable and is
// dropped (the content says what failed).
func openAIMessages(system string, msgs []events.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msgs)+1)
	if system != "" {
		out = append(out, openai.SystemMessage(system))
	}
	for i, m := range msgs {
		switch m.Role {
		case events.RoleSystem:
			out = append(out, openai.SystemMessage(m.Content.String()))
		case events.RoleUser:
			u := openai.ChatCompletionUserMessageParam{}
			if m.Name != "" {
				u.Name = openai.String(m.Name)
			}
			if m.Content.Kind == events.ContentParts {
				parts, err := userParts(m.Content.Parts)
				if err != nil {
					return nil, fmt.Errorf("history message %d: %w", i, err)
				}
				u.Content.OfArrayOfContentParts = parts
			} else {
				u.Content.OfString = openai.String(m.Content.String())
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfUser: &u})
		case events.RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Name != "" {
				a.Name = openai.String(m.Name)
			}
			if !m.Content.IsNull() || len(m.ToolCalls) == 0 {
				a.Content.OfString = openai.String(m.Content.String())
			}
			for _, c := range m.ToolCalls {
				args := c.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallParam{
					ID:       c.ID,
					Function: openai.ChatCompletionMessageToolCallFunctionParam{Name: c.Name, Arguments: args},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case events.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("history message %d: tool message without tool_call_id", i)
			}
			out = append(out, openai.ToolMessage(m.Content.String(), m.ToolCallID))
		default:
			return nil, fmt.Errorf("history message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

func userParts(ps []events.Part) ([]openai.ChatCompletionContentPartUnionParam, error) {
	out := make([]openai.ChatCompletionContentPartUnionParam, 0, len(ps))
	for j, p := range ps {
		switch p.Type {
		case events.PartText:
			out = append(out, openai.TextContentPart(p.Text))
		case events.PartImage:
			u := p.URL
			if p.Data != "" {
				u = "data:" + p.MediaType + ";base64," + p.Data
			}
			out = append(out, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: u, Detail: p.Detail}))
		case events.PartFile:
			f := openai.ChatCompletionContentPartFileFileParam{}
			if p.FileID != "" {
				f.FileID = openai.String(p.FileID)
			}
			if p.Filename != "" {
				f.Filename = openai.String(p.Filename)
			}
			switch {
			case p.Data != "":
				f.FileData = openai.String("data:" + p.MediaType + ";base64," + p.Data)
			case p.URL != "":
				f.FileData = openai.String(p.URL)
			}
			out = append(out, openai.FileContentPart(f))
		default:
			return nil, fmt.Errorf("content part %d: unsupported type %q", j, p.Type)
		}
	}
	return out, nil
}

// openAITools converts tool descriptions; a nil or empty schema becomes an
// object with no properties.
func openAITools(ts []Tool) ([]openai.ChatCompletionToolParam, error) {
	out := make([]openai.ChatCompletionToolParam, 0, len(ts))
	for _, t := range ts {
		params := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
		if len(strings.TrimSpace(string(t.Parameters))) > 0 {
			params = shared.FunctionParameters{}
			if err := json.Unmarshal(t.Parameters, &params); err != nil {
				return nil, fmt.Errorf("tool %q: parameters are not a JSON object: %w", t.Name, err)
			}
		}
		f := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			f.Description = openai.String(t.Description)
		}
		out = append(out, openai.ChatCompletionToolParam{Function: f})
	}
	return out, nil
}
