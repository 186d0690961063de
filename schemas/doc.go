// Package schemas is convlog's wire contract for producers and consumers
// that do not use Go: JSON Schema (draft 2020-12) files for the event
// envelope and every payload, and golden vectors that pin the msgpack bytes.
//
// # Files
//
//	envelope.json               the event envelope; selects the payload schema by "type"
//	defs.json                   shared definitions: ids, content, part, tool call, usage, message
//	payloads/<type>.json        one schema per event type (e.g. payloads/message.assistant.json)
//	testdata/golden/<type>.json one vector per event type: {"json": ..., "msgpack_hex": "..."}
//
// Each schema's "$id" is [BaseURL] followed by its path in [FS], and the
// schemas refer to each other by relative references, so a validator that
// is given every file of [FS] under its "$id" resolves them without network
// access. Object properties are listed in the order Go writes them as msgpack
// map keys.
//
// README.md in this directory explains how to write a valid event from these
// files alone: the subject, the NATS headers, the msgpack body layout and how
// to check an encoder against the golden vectors.
//
// The tests of this package check that every golden vector validates, that
// package events reproduces each vector byte for byte, that every Go event
// type encodes to schema-valid JSON, that the schemas name exactly the Go
// fields in Go's order, and that malformed events are rejected. Run
// "go test ./schemas/ -update" to regenerate the vectors after a deliberate
// wire change.
package schemas

import "embed"

// BaseURL is the common prefix of the schemas' "$id"s: the "$id" of a file
// is BaseURL followed by its path in [FS] (e.g. BaseURL+"envelope.json").
// The identifiers need not be fetched: load the files from [FS] or from disk.
const BaseURL = "https://raw.githubusercontent.com/convlog/convlog/main/schemas/"

// FS holds the schema files: envelope.json, defs.json and payloads/*.json.
//
//go:embed envelope.json defs.json payloads/*.json
var FS embed.FS
