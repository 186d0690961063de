package deepagents

import "errors"

// ErrInvalidHistory: a Save of messages that do not form a history a
// checkpointer stores (see [Validate]). Nothing was stored. Returned
// wrapped, naming the message and the problem. Not retryable as is.
var ErrInvalidHistory = errors.New("deepagents: invalid history")
