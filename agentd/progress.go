package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progress is a one-line progress report on stderr ("importing 12.3 MB /
// 40.0 MB (30%)"), drawn only when stderr is a terminal (never into a log
// file or a pipe) and redrawn at most every 100 ms. A nil *progress is
// valid and draws nothing, so callers need not check.
type progress struct {
	w       io.Writer
	desc    string
	total   int64 // < 0: unknown, only the count is drawn
	asBytes bool
	done    int64
	drawn   time.Time
}

// stderrIsTerminal reports whether progress is drawn; a variable so that
// tests can force it.
var stderrIsTerminal = func() bool {
	st, err := os.Stderr.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newProgress returns a report of total units (bytes when asBytes)
// described by desc, or nil when off is set or stderr is not a terminal.
// total < 0 draws the count alone.
func newProgress(total int64, desc string, asBytes, off bool) *progress {
	if off || !stderrIsTerminal() {
		return nil
	}
	return &progress{w: os.Stderr, desc: desc, total: total, asBytes: asBytes}
}

// set moves the report to n units done.
func (p *progress) set(n int64) {
	if p == nil {
		return
	}
	p.done = n
	if time.Since(p.drawn) >= 100*time.Millisecond {
		p.drawn = time.Now()
		line := p.desc + " " + p.units(p.done)
		if p.total > 0 {
			line += fmt.Sprintf(" / %s (%d%%)", p.units(p.total), 100*p.done/p.total)
		}
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	}
}

// add moves the report n units on.
func (p *progress) add(n int) {
	if p != nil {
		p.set(p.done + int64(n))
	}
}

// finish clears the line.
func (p *progress) finish() {
	if p != nil && !p.drawn.IsZero() {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// units formats n as a count or, for bytes, in MB.
func (p *progress) units(n int64) string {
	if p.asBytes {
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprint(n)
}
