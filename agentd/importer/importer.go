package importer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/convlog/convlog/agentd/replayrun"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/transcripts"
)

// Summary is the outcome of [Conversations]: what agentd import prints.
type Summary struct {
	Files           []string       `json:"files"`
	Threads         int            `json:"threads"`
	AlreadyImported int            `json:"already_imported"`
	Events          int            `json:"events"`
	Bytes           int            `json:"bytes"`
	Failed          int            `json:"failed"`
	Rejections      map[string]int `json:"rejections,omitempty"` // failures by reason (the error's first 120 bytes)
	Seconds         float64        `json:"seconds"`
	EventsPerSecond float64        `json:"events_per_second"`
	// Projected is set by the caller once a projector it ran has caught up
	// with what was imported.
	Projected bool `json:"projected"`
}

// FilesSize is the total size in bytes of files, the total a progress
// function counts up to.
func FilesSize(files []string) (int64, error) {
	var total int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return 0, err
		}
		total += st.Size()
	}
	return total, nil
}

// Conversations imports every conversation of the transcript files
// through c with opts. A line that does not read or a conversation that
// is refused is counted in Failed and Rejections and logged to log (nil:
// discarded); the import goes on. It returns ctx's error when ctx ends,
// and the file system's when a file cannot be read, with the summary so
// far. progress may be nil.
func Conversations(ctx context.Context, c *client.Client, files []string, opts client.ImportOptions, progress func(done int64), log *slog.Logger) (Summary, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	sum := Summary{Files: files, Rejections: map[string]int{}}
	err := readFiles(files, progress, func(file string, conv events.Conversation, err error) error {
		if err != nil {
			sum.Failed++
			sum.Rejections["unreadable line"]++
			log.Error("import: bad line", "file", file, "err", err)
			return nil
		}
		res, err := c.ImportConversation(ctx, conv, opts)
		if err != nil {
			sum.Failed++
			sum.Rejections[rejectionReason(err)]++
			log.Error("import: conversation failed", "file", filepath.Base(file), "id", conv.ID, "err", err)
			return ctx.Err()
		}
		sum.Threads++
		sum.Events += res.Events
		sum.Bytes += res.Bytes
		if res.AlreadyImported {
			sum.AlreadyImported++
		}
		return nil
	})
	if err != nil {
		return sum, err
	}
	sum.Seconds = time.Since(start).Seconds()
	if sum.Seconds > 0 {
		sum.EventsPerSecond = float64(sum.Events) / sum.Seconds
	}
	if len(sum.Rejections) == 0 {
		sum.Rejections = nil
	}
	return sum, nil
}

// readFiles calls fn with each conversation of files, or the error of a
// line that does not read, in order, and reports the bytes read so far
// to progress (nil: none). An error from fn ends the read.
func readFiles(files []string, progress func(int64), fn func(file string, conv events.Conversation, err error) error) error {
	if progress == nil {
		progress = func(int64) {}
	}
	var done int64 // bytes of the files read so far (an estimate within a file)
	for _, file := range files {
		st, err := os.Stat(file)
		if err != nil {
			return err
		}
		fileStart := done
		for conv, err := range transcripts.Read(file) {
			if err == nil {
				if b, merr := json.Marshal(conv); merr == nil {
					done = min(done+int64(len(b))+1, fileStart+st.Size())
					progress(done)
				}
			}
			if err := fn(file, conv, err); err != nil {
				return err
			}
		}
		done = fileStart + st.Size() // the whole file is read: exact again
		progress(done)
	}
	return nil
}

func rejectionReason(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

// EventFiles imports the raw events of files into their own tenants, or
// all into tenant when it is not "" (client.ImportEvents), and returns
// the totals. The first file that fails ends the import with its error,
// named by the file, and the totals so far.
func EventFiles(ctx context.Context, c *client.Client, files []string, tenant string) (client.EventsImportReport, error) {
	total := client.EventsImportReport{}
	for _, file := range files {
		fh, err := os.Open(file)
		if err != nil {
			return total, err
		}
		rep, err := c.ImportEvents(ctx, fh, tenant)
		fh.Close()
		total.Threads += rep.Threads
		total.Events += rep.Events
		total.Already += rep.Already
		total.Rejected += rep.Rejected
		if err != nil {
			return total, fmt.Errorf("%s: %w", file, err)
		}
	}
	return total, nil
}

// Report is the outcome of [Verify]: what agentd verify prints.
type Report struct {
	Threads   int    `json:"threads"`
	Identical int    `json:"identical"`
	Differing []Diff `json:"differing,omitempty"`
}

// Diff is a thread that differs from its source conversation.
type Diff struct {
	File   string `json:"file"` // the file's base name
	ID     string `json:"id"`   // the conversation's id
	Thread string `json:"thread"`
	Diff   string `json:"diff"` // the first difference, or the read's error
}

// Verify reads the thread of every conversation of the transcript files
// in tenant (consistent reads, deleted threads included) and compares it
// with the conversation (replayrun.Compare). A thread that cannot be read
// differs by its error. A line that does not read ends the check with its
// error; so does the file system's. progress may be nil.
func Verify(ctx context.Context, c *client.Client, tenant string, files []string, progress func(done int64)) (Report, error) {
	rep := Report{}
	err := readFiles(files, progress, func(file string, conv events.Conversation, err error) error {
		if err != nil {
			return err
		}
		rep.Threads++
		thread := events.ConversationThreadID(conv)
		th, err := c.Get(ctx, tenant, thread, client.Consistent(), client.IncludeDeleted())
		diff := ""
		if err != nil {
			diff = err.Error()
		} else {
			diff = replayrun.Compare(conv, th)
		}
		if diff == "" {
			rep.Identical++
			return nil
		}
		rep.Differing = append(rep.Differing, Diff{File: filepath.Base(file), ID: conv.ID, Thread: thread, Diff: diff})
		return nil
	})
	return rep, err
}
