package events

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ConversationThreadID is the deterministic thread id of a conversation
// from a transcript file: a UUIDv5 of its source and id, so importing the
// same file twice finds the same threads.
func ConversationThreadID(c Conversation) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("convlog:"+c.Source+"#"+c.ID)).String()
}

// ConversationEvents converts a transcript conversation to the events that
// record it on tenant/thread: thread.created (the leading system message as
// the system prompt, source, id and meta as metadata "source", "source_id" and
// "source_meta" (JSON text),
// the given reply mode) followed by one event per message. Event ids are
// deterministic UUIDv5s of tenant, thread and position, so a re-import is
// idempotent; times start at base and advance 1 ms per event.
//
// It returns an error naming the message when a message cannot be an event
// (unknown role, tool message without tool_call_id, a system message after
// the first).
func ConversationEvents(c Conversation, tenant, thread, producer string, replies ReplyMode, base time.Time) ([]Event, error) {
	system, msgs, err := SplitSystem(c.Messages)
	if err != nil {
		return nil, fmt.Errorf("conversation %s: %w", c.ID, err)
	}
	md := map[string]string{}
	if c.Source != "" {
		md["source"] = c.Source
	}
	if c.ID != "" {
		md["source_id"] = c.ID
	}
	if len(c.Meta) > 0 && string(c.Meta) != "null" {
		md["source_meta"] = string(c.Meta)
	}
	if len(md) == 0 {
		md = nil
	}
	out := make([]Event, 0, len(msgs)+1)
	mk := func(i int, p Payload) Event {
		return Event{
			ID:            uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprintf("%s/%s/%d", tenant, thread, i))).String(),
			Type:          p.EventType(),
			Tenant:        tenant,
			Thread:        thread,
			Time:          base.Add(time.Duration(i) * time.Millisecond).UTC(),
			Producer:      producer,
			SchemaVersion: SchemaVersion,
			Payload:       p,
		}
	}
	out = append(out, mk(0, ThreadCreated{SystemPrompt: system, Metadata: md, Replies: replies}))
	for i, m := range msgs {
		p := m.Payload()
		if p == nil {
			return nil, fmt.Errorf("conversation %s: message %d has role %q, which has no event type (only a leading system message becomes the system prompt)", c.ID, i, m.Role)
		}
		out = append(out, mk(i+1, p))
	}
	return out, nil
}
