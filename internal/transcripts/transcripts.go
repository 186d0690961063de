// Package transcripts finds and reads the real agent transcripts in
// ../shared/data/conversations (outside the repository; CI has them beside
// the clone) and turns a conversation into the events a writer would append.
package transcripts

import (
	"bufio"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/uuid"

	"github.com/convlog/convlog/events"
)

// Files are the transcript files, in a stable order.
var Files = []string{"taubench_gpt4o_airline.jsonl", "tooltalk.jsonl", "sweagent_fc_demos.jsonl"}

// Dir returns the transcript directory: $CONVLOG_TRANSCRIPTS if set, else
// ../shared/data/conversations relative to the repository root. It returns
// an error that says where it looked when the directory is missing.
func Dir() (string, error) {
	if d := os.Getenv("CONVLOG_TRANSCRIPTS"); d != "" {
		return d, nil
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	d := filepath.Join(root, "..", "shared", "data", "conversations")
	if _, err := os.Stat(filepath.Join(d, Files[0])); err != nil {
		return "", fmt.Errorf("transcripts: %s not found (set CONVLOG_TRANSCRIPTS): %w", d, err)
	}
	return filepath.Abs(d)
}

// Read yields the conversations of one JSONL file, one per line, with the
// line number (1-based). A line that does not parse yields an error naming
// the file and line, and reading goes on.
func Read(path string) iter.Seq2[events.Conversation, error] {
	return func(yield func(events.Conversation, error) bool) {
		f, err := os.Open(path)
		if err != nil {
			yield(events.Conversation{}, err)
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		line := 0
		for sc.Scan() {
			line++
			if len(sc.Bytes()) == 0 {
				continue
			}
			var c events.Conversation
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				if !yield(c, fmt.Errorf("%s:%d: %w", path, line, err)) {
					return
				}
				continue
			}
			if !yield(c, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(events.Conversation{}, fmt.Errorf("%s: %w", path, err))
		}
	}
}

// ThreadID is the deterministic thread id of a conversation: a UUIDv5 of
// its source and id, so importing the same file twice finds the same thread.
func ThreadID(c events.Conversation) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("convlog:"+c.Source+"#"+c.ID)).String()
}

// Events converts a conversation to the events that record it on
// tenant/thread: thread.created (system prompt, source and id as metadata,
// replies off: an imported thread is a record) followed by one event per
// message. Event ids are deterministic UUIDs so a re-import is idempotent;
// times start at base and advance 1 ms per event.
func Events(c events.Conversation, tenant, thread, producer string, base time.Time) ([]events.Event, error) {
	system, msgs, err := events.SplitSystem(c.Messages)
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
	out := make([]events.Event, 0, len(msgs)+1)
	mk := func(i int, p events.Payload) events.Event {
		return events.Event{
			ID:            uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprintf("%s/%s/%d", tenant, thread, i))).String(),
			Type:          p.EventType(),
			Tenant:        tenant,
			Thread:        thread,
			Time:          base.Add(time.Duration(i) * time.Millisecond).UTC(),
			Producer:      producer,
			SchemaVersion: events.SchemaVersion,
			Payload:       p,
		}
	}
	out = append(out, mk(0, events.ThreadCreated{SystemPrompt: system, Metadata: md, Replies: events.RepliesOff}))
	for i, m := range msgs {
		p := m.Payload()
		if p == nil {
			return nil, fmt.Errorf("conversation %s: message %d has role %q, which has no event type", c.ID, i, m.Role)
		}
		out = append(out, mk(i+1, p))
	}
	return out, nil
}
