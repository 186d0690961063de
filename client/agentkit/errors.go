package agentkit

import "errors"

// ErrInvalidResult: an [InferenceResult] passed to AppendResults or
// AppendTurn that does not map to events (an output message that is not
// an assistant message, a tool call entry that is not a tool message, Raw
// conflicting with the first output's Metadata). A programming error: not
// retryable. Returned wrapped, with the result's index.
var ErrInvalidResult = errors.New("agentkit: invalid result")
