package model

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// maxModelName is the longest model name, in bytes, that the offline and
// replay models accept in their configuration.
const maxModelName = 256

// validateStreamed reports every problem with the settings that the
// offline and replay models share: a negative TokenDelay (the pause of
// the emitter between streamed pieces) and a Model name longer than
// maxModelName bytes. kind names the model in the errors.
func validateStreamed(kind, model string, tokenDelay time.Duration) error {
	var errs []error
	if tokenDelay < 0 {
		errs = append(errs, fmt.Errorf("model: %s: TokenDelay %v is negative", kind, tokenDelay))
	}
	if len(model) > maxModelName {
		errs = append(errs, fmt.Errorf("model: %s: Model is %d bytes, the limit is %d", kind, len(model), maxModelName))
	}
	return errors.Join(errs...)
}

// words splits s into pieces whose concatenation is s: each piece is a run
// of spaces followed by a run of non-spaces; trailing spaces go with the
// last piece.
func words(s string) []string {
	var out []string
	start, i := 0, 0
	for i < len(s) {
		// skip spaces
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if !unicode.IsSpace(r) {
				break
			}
			i += n
		}
		// take the word
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if unicode.IsSpace(r) {
				break
			}
			i += n
		}
		out = append(out, s[start:i])
		start = i
	}
	if len(out) > 1 && isSpace(out[len(out)-1]) {
		out[len(out)-2] += out[len(out)-1]
		out = out[:len(out)-1]
	}
	return out
}

func isSpace(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// emitter sends deltas to onDelta, checking ctx before each one and waiting
// delay between them.
type emitter struct {
	ctx     context.Context
	onDelta func(Delta)
	delay   time.Duration
	sent    int
}

// send emits d; it returns ctx.Err() when ctx is done.
func (e *emitter) send(d Delta) error {
	if e.delay > 0 && e.sent > 0 {
		t := time.NewTimer(e.delay)
		select {
		case <-e.ctx.Done():
			t.Stop()
			return e.ctx.Err()
		case <-t.C:
		}
	}
	if err := e.ctx.Err(); err != nil {
		return err
	}
	e.sent++
	if e.onDelta != nil {
		e.onDelta(d)
	}
	return nil
}

// text emits s word by word as content (reasoning when reasoning is set).
func (e *emitter) text(s string, reasoning bool) error {
	for _, w := range words(s) {
		d := Delta{Content: w}
		if reasoning {
			d = Delta{Reasoning: w}
		}
		if err := e.send(d); err != nil {
			return err
		}
	}
	return nil
}

// response streams a complete turn: reasoning, content, then each tool call
// as two fragments (id and name, then the arguments).
func (e *emitter) response(r Response) error {
	if err := e.text(r.Reasoning, true); err != nil {
		return err
	}
	if err := e.text(r.Content.String(), false); err != nil {
		return err
	}
	for i, c := range r.ToolCalls {
		if err := e.send(Delta{ToolCall: &ToolCallDelta{Index: i, ID: c.ID, Name: c.Name}}); err != nil {
			return err
		}
		if c.Arguments != "" {
			if err := e.send(Delta{ToolCall: &ToolCallDelta{Index: i, Arguments: c.Arguments}}); err != nil {
				return err
			}
		}
	}
	return e.ctx.Err()
}
