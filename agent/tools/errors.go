package tools

import "errors"

// Sentinel errors of package tools. Match with errors.Is. They come from
// registration; running a tool never returns an error (see [Runner]).
var (
	// ErrInvalidTool: a tool has a bad name, a schema that does not compile
	// or is not a JSON object, a negative timeout, or no handler.
	ErrInvalidTool = errors.New("tools: invalid tool")
	// ErrDuplicateTool: a tool with that name is already registered, or the
	// name appears twice in one Register call.
	ErrDuplicateTool = errors.New("tools: duplicate tool")
)
