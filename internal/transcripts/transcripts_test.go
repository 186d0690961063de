package transcripts

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnderRootNamesADirectoryBesideTheRootThroughTheRoot(t *testing.T) {
	cases := []struct {
		name, root, dir, want string
	}{
		{"a directory beside the root climbs out of it", "/w/main", "/w/full/data", "/w/main/../full/data"},
		{"a directory far away climbs out further", "/w/main", "/data/conv", "/w/main/../../data/conv"},
		{"a directory inside the root stays as it is", "/w/main", "/w/main/testdata/x", "/w/main/testdata/x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := underRoot(filepath.FromSlash(c.root), filepath.FromSlash(c.dir))
			require.Equal(t, filepath.FromSlash(c.want), got)
			require.Equal(t, filepath.Clean(c.dir), filepath.Clean(got), "the same directory")
		})
	}
}

// The go command keys a test's cached result by the files under the
// module's root that it opened or stat'ed: every file of the set the tests
// run on has a path that starts with the root, whichever set it is.
func TestLoadNamesEveryFileThroughTheModuleRoot(t *testing.T) {
	s := Load(t)
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	for _, f := range Files {
		require.True(t, strings.HasPrefix(s.Path(f), root+string(filepath.Separator)), "%s starts with %s", s.Path(f), root)
		require.Positive(t, s.Files[f].Conversations, f)
	}
	require.Contains(t, s.String(), filepath.Clean(s.Dir))
}
