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
	// (schemas/envelope.json) with "seq" and "stored_at" added (see
	// events.Stored.MarshalJSON); an undecodable event is {"seq",
	// "stored_at", "id", "type", "error", "data" (base64 bytes)}.
	ExportEvents ExportFormat = "events"
)

// ExportThread streams tenant/thread to w as JSONL in format. Events are
// read page by page, so memory does not grow with the thread (the openai
// format folds the thread and holds its projected history).
//
// Errors: *NotFoundError, an error naming an unknown format, write errors.
func (c *Client) ExportThread(ctx context.Context, tenant, thread string, format ExportFormat, w io.Writer) error {
	if p := c.route(tenant, thread); p != c {
		return p.ExportThread(ctx, tenant, thread, format, w)
	}
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
			var line []byte
			if derr == nil {
				line, derr = json.Marshal(st)
			}
			if derr != nil {
				// Undecodable events stay in the export, marked.
				line, _ = json.Marshal(struct {
					Seq      uint64    `json:"seq"`
					StoredAt time.Time `json:"stored_at"`
					ID       string    `json:"id,omitempty"`
					Type     string    `json:"type,omitempty"`
					Error    string    `json:"error"`
					Data     []byte    `json:"data"`
				}{m.Sequence, m.Time.UTC(), st.ID, string(st.Type), derr.Error(), m.Data})
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

// ExportTenant streams every thread of tenant (as listed by [Client.List],
// newest first, soft-deleted ones included) to w as JSONL in format, one
// thread after another, and returns how many threads it wrote. Memory stays
// bounded by one thread (openai) or one page of events (events).
func (c *Client) ExportTenant(ctx context.Context, tenant string, format ExportFormat, w io.Writer) (int, error) {
	n := 0
	for t, err := range c.ListAll(ctx, tenant, ListOptions{IncludeDeleted: true}) {
		if err != nil {
			return n, err
		}
		if err := c.ExportThread(ctx, tenant, t.Thread, format, w); err != nil {
			return n, fmt.Errorf("client: export %s/%s: %w", tenant, t.Thread, err)
		}
		n++
	}
	return n, nil
}
