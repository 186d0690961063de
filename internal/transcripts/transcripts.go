// Package transcripts finds and reads the real agent transcripts, the full
// set in ../shared/data/conversations (outside the repository; CI has it
// beside the clone) or the sample in testdata/conversations, and turns a
// conversation into the events a writer would append.
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

// Counts is what a transcript file holds: conversations, messages and
// tool calls, and the quirks the tests check survive a round trip (null
// and empty contents, non-ASCII text, "\r" and backspace bytes, tool
// messages that carry a name).
type Counts struct {
	Conversations, Messages, ToolCalls int
	NullContent, EmptyContent          int
	NonASCII, CR, Backspace, Named     int
}

// Add returns the sum of c and o.
func (c Counts) Add(o Counts) Counts {
	return Counts{c.Conversations + o.Conversations, c.Messages + o.Messages, c.ToolCalls + o.ToolCalls,
		c.NullContent + o.NullContent, c.EmptyContent + o.EmptyContent,
		c.NonASCII + o.NonASCII, c.CR + o.CR, c.Backspace + o.Backspace, c.Named + o.Named}
}

// Set is a directory of transcript files (Files) and what each holds.
type Set struct {
	// Dir is the directory, absolute.
	Dir string
	// Sample is true for the sample shipped in testdata/conversations,
	// false for the full set.
	Sample bool
	// Files maps each of Files to its counts.
	Files map[string]Counts
}

// Total is the sum of the counts of every file.
func (s Set) Total() Counts {
	var t Counts
	for _, c := range s.Files {
		t = t.Add(c)
	}
	return t
}

// Path is the path of file in the set.
func (s Set) Path(file string) string { return filepath.Join(s.Dir, file) }

// fullSet is the full set of transcripts (the README's "Real
// conversations"), measured with the same rules as the sample.
var fullSet = map[string]Counts{
	"taubench_gpt4o_airline.jsonl": {Conversations: 200, Messages: 5308, ToolCalls: 1164, NullContent: 1074, EmptyContent: 92, NonASCII: 83, Named: 1164},
	"tooltalk.jsonl":               {Conversations: 78, Messages: 1113, ToolCalls: 266, NullContent: 266, NonASCII: 1, Named: 266},
	"sweagent_fc_demos.jsonl":      {Conversations: 5, Messages: 98, ToolCalls: 44, CR: 1387, Backspace: 10},
}

// sampleSet is testdata/conversations: lines of the full set's files
// (README.md there says which), measured with the same rules.
var sampleSet = map[string]Counts{
	"taubench_gpt4o_airline.jsonl": {Conversations: 3, Messages: 106, ToolCalls: 28, NullContent: 27, EmptyContent: 3, NonASCII: 1, Named: 28},
	"tooltalk.jsonl":               {Conversations: 4, Messages: 87, ToolCalls: 16, NullContent: 16, NonASCII: 1, Named: 16},
	"sweagent_fc_demos.jsonl":      {Conversations: 3, Messages: 64, ToolCalls: 29, CR: 895, Backspace: 10},
}

// Find returns the transcripts the tests run on: the full set in
// $CONVLOG_TRANSCRIPTS, or in ../shared/data/conversations beside the
// repository, when it is there; otherwise the sample shipped in
// testdata/conversations, so that "go test ./..." passes on a fresh clone.
// With CI=true the full set is required (CI has it beside the clone) and
// its absence is an error that says where it looked.
//
// CONVLOG_TRANSCRIPTS=sample picks the sample even when the full set is
// there (to run the tests as a fresh clone would).
func Find() (Set, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	sample := func() (Set, error) {
		abs, err := filepath.Abs(filepath.Join(root, "testdata", "conversations"))
		return Set{Dir: abs, Sample: true, Files: sampleSet}, err
	}
	if os.Getenv("CONVLOG_TRANSCRIPTS") == "sample" {
		return sample()
	}
	if d := os.Getenv("CONVLOG_TRANSCRIPTS"); d != "" {
		abs, err := filepath.Abs(d)
		return Set{Dir: abs, Files: fullSet}, err
	}
	full := filepath.Join(root, "..", "shared", "data", "conversations")
	if _, err := os.Stat(filepath.Join(full, Files[0])); err == nil {
		abs, err := filepath.Abs(full)
		return Set{Dir: abs, Files: fullSet}, err
	} else if os.Getenv("CI") == "true" {
		return Set{}, fmt.Errorf("transcripts: %s not found (CI runs on the full set; set CONVLOG_TRANSCRIPTS): %w", full, err)
	}
	return sample()
}

// Dir returns Find's directory.
func Dir() (string, error) {
	s, err := Find()
	return s.Dir, err
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
