package client

import (
	"context"
	"errors"
	"io"
)

// ExportFormat selects the JSONL shape of an export.
type ExportFormat string

// Export formats.
const (
	// ExportOpenAI writes one conversation per line in the transcript
	// format {"source","id","meta","messages":[OpenAI messages]}.
	ExportOpenAI ExportFormat = "openai"
	// ExportEvents writes one stored event per line: the event's JSON form
	// plus "seq" and "stored_at".
	ExportEvents ExportFormat = "events"
)

// ExportThread streams tenant/thread to w as JSONL in format.
func (c *Client) ExportThread(ctx context.Context, tenant, thread string, format ExportFormat, w io.Writer) error {
	return errors.New("client: ExportThread is not implemented yet")
}
