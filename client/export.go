package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/convlog/convlog/events"
)

// ExportFormat selects the JSONL shape of an export.
type ExportFormat string

// Export formats.
const (
	// ExportOpenAI writes one conversation per line in the transcript
	// format {"source","id","meta","messages":[OpenAI messages]}: the
	// system prompt first, tool calls in the flat {"id","name","arguments"}
	// shape, so `agentd import` reads it back.
	ExportOpenAI ExportFormat = "openai"
	// ExportEvents writes one stored event per line: the event's JSON form
	// (schemas/envelope.json) plus "seq" and "stored_at".
	ExportEvents ExportFormat = "events"
)

// StoredJSON is the JSON line of an [ExportEvents] export.
type StoredJSON struct {
	Seq      uint64          `json:"seq"`
	StoredAt time.Time       `json:"stored_at"`
	Event    json.RawMessage `json:"event"`
}

// ExportThread streams tenant/thread to w as JSONL in format. Events are
// read page by page, so memory does not grow with the thread (the openai
// format folds the thread and holds its projected history).
//
// Errors: *NotFoundError, an error naming an unknown format, write errors.
func (c *Client) ExportThread(ctx context.Context, tenant, thread string, format ExportFormat, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	switch format {
	case ExportEvents:
		n := 0
		subject, err := c.subjects.Thread(tenant, thread)
		if err != nil {
			return err
		}
		for m, err := range c.readRaw(ctx, subject, 1, 0) {
			if err != nil {
				return err
			}
			st, derr := decodeRaw(m)
			var raw json.RawMessage
			if derr == nil {
				raw, derr = json.Marshal(st.Event)
			}
			if derr != nil {
				// Keep undecodable events in the export, as a JSON string of their bytes.
				raw, _ = json.Marshal(map[string]any{"undecodable": m.Data, "error": derr.Error()})
			}
			line, err := json.Marshal(StoredJSON{Seq: m.Sequence, StoredAt: m.Time.UTC(), Event: raw})
			if err != nil {
				return err
			}
			bw.Write(line)
			bw.WriteByte('\n')
			n++
		}
		if n == 0 {
			return &NotFoundError{Tenant: tenant, Thread: thread}
		}
	case ExportOpenAI, "":
		th, err := c.Get(ctx, tenant, thread, Consistent(), IncludeDeleted())
		if err != nil {
			return err
		}
		line, err := json.Marshal(ConversationOf(th))
		if err != nil {
			return err
		}
		bw.Write(line)
		bw.WriteByte('\n')
	default:
		return fmt.Errorf("client: export format %q: want %q or %q", format, ExportOpenAI, ExportEvents)
	}
	return bw.Flush()
}

// ConversationOf returns th as a transcript conversation: source and id
// from the metadata "source" and "source_id" (set by import) or the thread
// id, meta from "source_meta", the system prompt as a leading system message, then the history.
func ConversationOf(th *Thread) events.Conversation {
	conv := events.Conversation{Source: th.Metadata["source"], ID: th.Metadata["source_id"]}
	if conv.ID == "" {
		conv.Source, conv.ID = "convlog:"+th.Tenant, th.Thread
	}
	if m := th.Metadata["source_meta"]; m != "" && json.Valid([]byte(m)) {
		conv.Meta = json.RawMessage(m)
	}
	if th.SystemPrompt != nil {
		conv.Messages = append(conv.Messages, events.ToOpenAIFlat(events.Message{Role: events.RoleSystem, Content: events.Text(*th.SystemPrompt)}))
	}
	for _, m := range th.Messages {
		conv.Messages = append(conv.Messages, events.ToOpenAIFlat(m))
	}
	return conv
}
