package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/convlog/convlog/agent/internal/recording"
	"github.com/convlog/convlog/events"
)

// DefaultReplayModel is the model name the replay provider reports.
const DefaultReplayModel = "replay"

// ReplayConfig configures [Replay]. The zero value works.
type ReplayConfig struct {
	// Model is the model name reported in responses when the request names
	// none. Default [DefaultReplayModel].
	Model string
	// TokenDelay is a pause between streamed pieces. Default 0.
	TokenDelay time.Duration
}

// DefaultReplayConfig returns the configuration the zero value stands for.
func DefaultReplayConfig() ReplayConfig { return ReplayConfig{Model: DefaultReplayModel} }

// Validate reports every problem with c.
func (c ReplayConfig) Validate() error {
	return validateStreamed("replay", c.Model, c.TokenDelay)
}

// Replay plays back the assistant turns of a recorded conversation.
//
// Matching rule: system messages are ignored on both sides (the request's
// system prompt is not compared either). The other history messages must
// equal the recording's, one for one from the start: same role; user
// messages the same text; assistant messages the same text and the same
// tool calls (id, name and arguments byte for byte); tool messages the same
// tool_call_id (their content is not compared, so live tools may answer
// differently). With n such messages in the history, Generate returns the
// recording's message n, which must be an assistant message. Position, not
// call id, decides: recorded threads reuse call ids.
//
// The turn is returned as recorded: null content stays null, text stays
// text (parts stay parts), tool calls keep their recorded ids and argument
// bytes, reasoning is kept. Usage is nil (recordings hold none). It is
// streamed like [Offline]'s: reasoning and content word by word, then each
// call as two fragments.
//
// Errors: *DivergedError (wrapping [ErrDiverged]) when the history differs
// from the recording, naming both indexes and what differs;
// [ErrNoRecordedTurn] (wrapped, with the index) when the recording ends
// there or goes on with a user or tool message; ctx.Err().
//
// Replay is immutable and safe for concurrent use.
type Replay struct {
	rec *recording.Recording
	cfg ReplayConfig
}

var _ Provider = (*Replay)(nil)

// NewReplay returns a provider playing back conv (for a bare message list,
// pass events.Conversation{Messages: msgs}). It returns an error naming the
// message when a recorded message cannot be converted (an unknown role, a
// tool message without tool_call_id), and the errors of
// [ReplayConfig.Validate].
func NewReplay(conv events.Conversation, cfg ReplayConfig) (*Replay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rec, err := recording.New(conv)
	if err != nil {
		return nil, fmt.Errorf("model: replay: %w", err)
	}
	if cfg.Model == "" {
		cfg.Model = DefaultReplayModel
	}
	return &Replay{rec: rec, cfg: cfg}, nil
}

// Turns returns the number of assistant turns in the recording.
func (p *Replay) Turns() int {
	n := 0
	for _, m := range p.rec.Messages {
		if m.Role == events.RoleAssistant {
			n++
		}
	}
	return n
}

// Generate implements [Provider].
func (p *Replay) Generate(ctx context.Context, req Request, onDelta func(Delta)) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	pos, err := p.rec.Match(req.Messages)
	if err != nil {
		var mm *recording.Mismatch
		if errors.As(err, &mm) {
			return Response{}, &DivergedError{Thread: req.Thread, Recording: p.rec.ID, HistoryIndex: mm.HistoryIndex,
				RecordingIndex: mm.RecordingIndex, Reason: mm.Reason}
		}
		return Response{}, fmt.Errorf("model: replay %q: %w", p.rec.ID, err)
	}
	if pos >= len(p.rec.Messages) {
		return Response{}, fmt.Errorf("%w: recording %q ends after the %d messages of the history (system messages not counted)",
			ErrNoRecordedTurn, p.rec.ID, pos)
	}
	m := p.rec.Messages[pos]
	if m.Role != events.RoleAssistant {
		return Response{}, fmt.Errorf("%w: recording %q goes on with a %s message at message %d",
			ErrNoRecordedTurn, p.rec.ID, m.Role, p.rec.OriginalIndex(pos))
	}
	resp := Response{Content: m.Content, Reasoning: m.Reasoning, ToolCalls: slices.Clone(m.ToolCalls), Model: p.cfg.Model,
		FinishReason: "stop"}
	if len(m.ToolCalls) > 0 {
		resp.FinishReason = "tool_calls"
	}
	if req.Model != "" {
		resp.Model = req.Model
	}
	e := emitter{ctx: ctx, onDelta: onDelta, delay: p.cfg.TokenDelay}
	if err := e.response(resp); err != nil {
		return Response{}, err
	}
	return resp, nil
}
