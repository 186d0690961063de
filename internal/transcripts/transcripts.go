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

// ThreadID is events.ConversationThreadID.
func ThreadID(c events.Conversation) string { return events.ConversationThreadID(c) }

// Events is events.ConversationEvents with replies off (an imported thread
// is a record, not new input).
func Events(c events.Conversation, tenant, thread, producer string, base time.Time) ([]events.Event, error) {
	return events.ConversationEvents(c, tenant, thread, producer, events.RepliesOff, base)
}
