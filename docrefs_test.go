package convlog_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docRef is a path to a document of this repository as code and docs cite
// it: docs/<name>.md, or a package's README.md or doc.go.
var docRef = regexp.MustCompile(`\bdocs/[a-z0-9-]+\.md\b`)

// outside are references that point out of the repository; nothing a user
// reads (code, docs, --help) may depend on them. internal/transcripts may
// look for the optional full set of transcripts beside the clone.
var outside = regexp.MustCompile(`\.\./shared|\bDESIGN\.md\b`)

var outsideAllowed = map[string]bool{"internal/transcripts/transcripts.go": true}

// Every document that code and docs cite is in the repository, and none
// points outside it.
func TestEveryCitedDocumentIsInTheRepository(t *testing.T) {
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "dist", ".ci":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".ts", ".json", ".mjs", ".yml":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		text := string(b)
		for _, line := range strings.Split(text, "\n") {
			if outside.MatchString(line) && !outsideAllowed[filepath.ToSlash(path)] {
				assert.Fail(t, "points outside the repository", "%s: %s", path, strings.TrimSpace(line))
			}
		}
		for _, ref := range docRef.FindAllString(text, -1) {
			_, err := os.Stat(ref)
			assert.NoError(t, err, "%s cites %s", path, ref)
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, checked, 100)
}
