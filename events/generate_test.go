package events_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convlog/convlog/events/internal/gen"
)

// The files generated from the registry (events/internal/gen) are what
// "go generate ./events/" writes now: a type added to the registry, or a
// payload field or schema changed, without running it fails here.
func TestGeneratedFilesAreUpToDate(t *testing.T) {
	files, err := gen.Files("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s is stale: run go generate ./events/\n%s", f.Path, lineDifference(got, f.Data))
		}
	}
}

// lineDifference lists the lines of want that got lacks and the lines of
// got that want does not have (at most 30 of each).
func lineDifference(got, want []byte) string {
	count := func(b []byte) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(string(b), "\n") {
			m[l]++
		}
		return m
	}
	g, w := count(got), count(want)
	var b strings.Builder
	for _, side := range []struct {
		title      string
		from, less map[string]int
		lines      []byte
	}{{"lacks", w, g, want}, {"has instead", g, w, got}} {
		n := 0
		for _, l := range strings.Split(string(side.lines), "\n") {
			if side.from[l] > side.less[l] && n < 30 {
				fmt.Fprintf(&b, "%s:\t%s\n", side.title, l)
				side.less[l]++
				n++
			}
		}
	}
	return b.String()
}
