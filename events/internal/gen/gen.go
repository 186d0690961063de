// Package gen writes the files that follow from the event-type registry
// (events.Registry) and the payload schemas, so that an event type is its
// payload type, its registry entry, its fold case and its payload schema,
// and nothing else is written by hand:
//
//	events/decode_gen.go         the hand-written decoder's type switches and one reader per payload type
//	schemas/envelope.json        the "type" enum and the payload selection (allOf)
//	schemas/README.md            the table of event types, between marker comments
//	agentd/httpapi/openapi.json  the Event schema's "type" enum (registry entries with InAPI)
//	audit/eventtypes_gen.go      the type names package audit compares headers with
//
// The JSON files and the README are edited in place: only the generated
// parts change, in the files' own indentation. "go generate ./events/"
// runs the command in cmd/eventsgen; events' TestGeneratedFilesAreUpToDate
// fails when a file on disk differs from what [Files] returns.
package gen

import (
	"fmt"
	"os"
	"path/filepath"
)

// File is one generated file: its path from the repository root, with
// slashes, and its whole content.
type File struct {
	Path string
	Data []byte
}

// Files returns every generated file, given the repository root. The
// files edited in place are read from root.
func Files(root string) ([]File, error) {
	src, err := parseEvents(filepath.Join(root, "events"))
	if err != nil {
		return nil, err
	}
	decode, err := decodeGo(src)
	if err != nil {
		return nil, err
	}
	out := []File{{Path: "events/decode_gen.go", Data: decode}}
	for _, f := range []struct {
		path string
		gen  func([]byte) ([]byte, error)
	}{
		{"schemas/envelope.json", envelopeJSON},
		{"agentd/httpapi/openapi.json", openAPIJSON},
		{"schemas/README.md", func(b []byte) ([]byte, error) { return schemasREADME(root, b) }},
	} {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.path)))
		if err != nil {
			return nil, err
		}
		b, err = f.gen(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		out = append(out, File{Path: f.path, Data: b})
	}
	audit, err := auditGo(src)
	if err != nil {
		return nil, err
	}
	return append(out, File{Path: "audit/eventtypes_gen.go", Data: audit}), nil
}

// Write writes files under root.
func Write(root string, files []File) error {
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(f.Path)), f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
