package main

import (
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress is a progress bar on stderr that is drawn only when stderr is a
// terminal (never into a log file or a pipe). A nil *progress is valid and
// draws nothing, so callers need not check.
type progress struct{ bar *progressbar.ProgressBar }

// stderrIsTerminal reports whether progress bars are drawn; a variable so
// that tests can force it.
var stderrIsTerminal = func() bool { return term.IsTerminal(int(os.Stderr.Fd())) }

// newProgress returns a bar of total units (bytes when asBytes) described
// by desc, or nil when off is set or stderr is not a terminal. total < 0
// draws a spinner with a count.
func newProgress(total int64, desc string, asBytes, off bool) *progress {
	if off || !stderrIsTerminal() {
		return nil
	}
	return &progress{bar: progressbar.NewOptions64(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowBytes(asBytes),
		progressbar.OptionSetDescription(desc), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())}
}

// set moves the bar to n units done.
func (p *progress) set(n int64) {
	if p != nil {
		_ = p.bar.Set64(n)
	}
}

// add moves the bar n units on.
func (p *progress) add(n int) {
	if p != nil {
		_ = p.bar.Add(n)
	}
}

// finish draws the bar at 100% and clears it.
func (p *progress) finish() {
	if p != nil {
		_ = p.bar.Finish()
	}
}

// filesSize is the total size of files in bytes.
func filesSize(files []string) (int64, error) {
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
