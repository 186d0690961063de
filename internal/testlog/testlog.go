// Package testlog holds what tests use to read what a component logs or
// prints while it runs.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that a logger (or a process's output copier)
// may write while a test reads it: Write and String are safe for
// concurrent use. The zero value is an empty buffer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p (io.Writer); it never fails.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
