package model

import (
	"slices"
	"strings"

	"github.com/convlog/convlog/events"
)

// Accumulator folds the [Delta]s of one Generate call into the turn they
// describe: content and reasoning pieces are concatenated, tool-call
// fragments are merged by index (the first non-empty id and name win,
// argument pieces are concatenated).
//
// The zero value is ready to use. An Accumulator is not safe for concurrent
// use; onDelta callbacks are sequential, so that is not needed.
type Accumulator struct {
	content, reasoning strings.Builder
	sawContent         bool
	calls              map[int]*events.ToolCall
}

// Add folds one delta.
func (a *Accumulator) Add(d Delta) {
	if d.Content != "" {
		a.content.WriteString(d.Content)
		a.sawContent = true
	}
	a.reasoning.WriteString(d.Reasoning)
	if tc := d.ToolCall; tc != nil {
		if a.calls == nil {
			a.calls = make(map[int]*events.ToolCall)
		}
		c := a.calls[tc.Index]
		if c == nil {
			c = &events.ToolCall{}
			a.calls[tc.Index] = c
		}
		if c.ID == "" {
			c.ID = tc.ID
		}
		if c.Name == "" {
			c.Name = tc.Name
		}
		c.Arguments += tc.Arguments
	}
}

// Content returns the concatenated content pieces.
func (a *Accumulator) Content() string { return a.content.String() }

// Reasoning returns the concatenated reasoning pieces.
func (a *Accumulator) Reasoning() string { return a.reasoning.String() }

// ToolCalls returns the merged tool calls ordered by index.
func (a *Accumulator) ToolCalls() []events.ToolCall {
	idx := make([]int, 0, len(a.calls))
	for i := range a.calls {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	out := make([]events.ToolCall, 0, len(idx))
	for _, i := range idx {
		out = append(out, *a.calls[i])
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Response returns the turn folded so far: content is null when no content
// piece arrived and there are tool calls, text otherwise. Model, Usage and
// FinishReason are left empty.
func (a *Accumulator) Response() Response {
	r := Response{Reasoning: a.Reasoning(), ToolCalls: a.ToolCalls()}
	if a.sawContent || len(r.ToolCalls) == 0 {
		r.Content = events.Text(a.Content())
	}
	return r
}
