// Package transcripts finds and reads the real agent transcripts, the full
// set (outside the repository: $CONVLOG_TRANSCRIPTS, or the folder CI
// puts beside the clone, [Find]) or the sample in testdata/conversations, and turns a conversation into the
// events a writer would append.
//
// # The test cache
//
// go test reuses a package's earlier result when nothing the test read
// changed: the go command keys the cached result by the environment
// variables the test looked up and the files it opened or stat'ed, but
// only files under the module's root. The full set is outside it. So
// [Find] names the full set by a path that starts with the module's root
// and climbs out with "..", and never cleans it ([Set.Dir], [Set.Path]):
// the go command then checks those files like the repository's own, and
// adding, changing or removing the full set runs the tests again instead
// of replaying a result from the other data set. Tests call [Load], which
// logs which set they run on.
package transcripts

import (
	"bufio"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
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
	// Dir is the directory, absolute; for the full set it starts with
	// the module's root and is not cleaned (see the package doc).
	Dir string
	// Sample is true for the sample shipped in testdata/conversations,
	// false for the full set.
	Sample bool
	// Files maps each of Files to its counts.
	Files map[string]Counts
}

// String names the set and its directory, for a test's log.
func (s Set) String() string {
	kind := "the full set of transcripts"
	if s.Sample {
		kind = "the sample of transcripts"
	}
	return fmt.Sprintf("%s in %s (%d conversations)", kind, filepath.Clean(s.Dir), s.Total().Conversations)
}

// Total is the sum of the counts of every file.
func (s Set) Total() Counts {
	var t Counts
	for _, c := range s.Files {
		t = t.Add(c)
	}
	return t
}

// Path is the path of file in the set, as Dir is: not cleaned.
func (s Set) Path(file string) string { return s.Dir + string(filepath.Separator) + file }

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
		if err != nil {
			return Set{}, err
		}
		full := Set{Dir: underRoot(root, abs), Files: fullSet}
		if err := full.stat(); err != nil {
			return Set{}, fmt.Errorf("transcripts: CONVLOG_TRANSCRIPTS=%s: %w", d, err)
		}
		return full, nil
	}
	full := Set{Dir: underRoot(root, filepath.Join(root, "..", "shared", "data", "conversations")), Files: fullSet}
	if err := full.stat(); err == nil {
		return full, nil
	} else if os.Getenv("CI") == "true" {
		return Set{}, fmt.Errorf("transcripts: %s not found (CI runs on the full set; set CONVLOG_TRANSCRIPTS): %w", filepath.Clean(full.Dir), err)
	}
	return sample()
}

// Load is [Find] for a test: it fails t when Find fails, and logs which
// set the test runs on.
func Load(t testing.TB) Set {
	t.Helper()
	s, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("transcripts: %s", s)
	return s
}

// Conversations yields every conversation of the set with the name of its
// file, file by file in [Files] order; a line that does not read fails t
// (t.Fatal, from the test's goroutine), which ends the test.
func (s Set) Conversations(t testing.TB) iter.Seq2[string, events.Conversation] {
	return func(yield func(string, events.Conversation) bool) {
		for _, f := range Files {
			for c, err := range Read(s.Path(f)) {
				if err != nil {
					t.Helper()
					t.Fatal(err)
				}
				if !yield(f, c) {
					return
				}
			}
		}
	}
}

// underRoot returns dir as a path that lexically starts with root (root,
// then ".." up to where dir branches off): the form the go command checks
// for its test cache. Nothing cleans it.
func underRoot(root, dir string) string {
	rel, err := filepath.Rel(root, dir)
	if err != nil || !strings.HasPrefix(rel, "..") {
		return dir
	}
	return root + string(filepath.Separator) + rel
}

// stat checks that every file of the set is there; each stat enters the
// test cache's key (see the package doc).
func (s Set) stat() error {
	for _, f := range Files {
		if _, err := os.Stat(s.Path(f)); err != nil {
			return err
		}
	}
	return nil
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
