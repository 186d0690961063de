package model

import (
	"errors"
	"fmt"
)

// Sentinel errors of package model. Match with errors.Is.
var (
	// ErrDiverged is wrapped by *DivergedError: the history given to a
	// [Replay] provider is not a prefix of its recording. Not retryable.
	ErrDiverged = errors.New("model: history diverged from the recording")
	// ErrNoRecordedTurn: the history matches the recording, but the
	// recording has no assistant turn at that point (it ends, or it goes on
	// with a user or tool message). Not retryable.
	ErrNoRecordedTurn = errors.New("model: the recording has no assistant turn here")
)

// DivergedError says where a history left a [Replay] recording. It wraps
// [ErrDiverged].
type DivergedError struct {
	// Thread is Request.Thread.
	Thread string
	// Recording is the conversation id of the recording ("" if it has none).
	Recording string
	// HistoryIndex is the index of the first differing message in
	// Request.Messages.
	HistoryIndex int
	// RecordingIndex is the index of the message it was compared with in the
	// recorded conversation (system messages counted), -1 past its end.
	RecordingIndex int
	// Reason says what differs.
	Reason string
}

// Error implements error.
func (e *DivergedError) Error() string {
	at := fmt.Sprintf("recording message %d", e.RecordingIndex)
	if e.RecordingIndex < 0 {
		at = "past the end of the recording"
	}
	return fmt.Sprintf("model: replay %q, thread %s: history message %d (%s) diverged: %s", e.Recording, e.Thread, e.HistoryIndex, at, e.Reason)
}

// Unwrap returns [ErrDiverged].
func (e *DivergedError) Unwrap() error { return ErrDiverged }

// APIError is a failed call to a model server: a non-2xx status, a
// connection failure, an error event in the stream, or a stream that could
// not be turned into a valid assistant turn.
type APIError struct {
	// Provider names the provider ("openai").
	Provider string
	// Model is the model that was asked.
	Model string
	// Thread is Request.Thread.
	Thread string
	// StatusCode is the HTTP status, 0 when there was no response or the
	// failure came after a 200 (in the stream).
	StatusCode int
	// Message is what failed, in the server's words where it gave some.
	Message string
	// Retryable says whether the same request may succeed later: true for
	// 408, 409, 429 and 5xx statuses (after the SDK's own retries ran out),
	// connection failures, error events and streams cut short; false for
	// other 4xx (bad key, unknown model, bad request) and unusable output
	// the server sent in full.
	Retryable bool
	// Err is the underlying error, if any (e.g. *openai.Error).
	Err error
}

// Error implements error.
func (e *APIError) Error() string {
	s := fmt.Sprintf("model: %s model %q, thread %s: ", e.Provider, e.Model, e.Thread)
	if e.StatusCode != 0 {
		s += fmt.Sprintf("HTTP %d: ", e.StatusCode)
	}
	s += e.Message
	if e.Retryable {
		s += " (retryable)"
	}
	return s
}

// Unwrap returns the underlying error.
func (e *APIError) Unwrap() error { return e.Err }

// IsRetryable reports whether Generate may succeed if called again with the
// same request: true only for an *APIError with Retryable set. Context
// errors, [ErrDiverged], [ErrNoRecordedTurn] and bad requests are not
// retryable.
func IsRetryable(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Retryable
}
