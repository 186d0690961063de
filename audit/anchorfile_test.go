package audit_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/audit"
)

// An anchor file that does not exist yet is no anchor; one SaveAnchor
// wrote reads back as it was and replaces the last; a file that holds
// no anchor is an error naming it.
func TestAnchorFileRoundTripsAndRefusesWhatIsNoAnchor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	a, err := audit.LoadAnchor(path)
	require.NoError(t, err)
	require.Nil(t, a)

	require.NoError(t, audit.SaveAnchor(path, audit.Anchor{MsgSeq: 7, Hash: "ab"}))
	require.NoError(t, audit.SaveAnchor(path, audit.Anchor{MsgSeq: 12, Hash: "cd"}))
	a, err = audit.LoadAnchor(path)
	require.NoError(t, err)
	require.Equal(t, &audit.Anchor{MsgSeq: 12, Hash: "cd"}, a)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	for _, bad := range []string{"not json", `{"msg_seq": 0, "hash": "ab"}`, `{"msg_seq": 3}`} {
		require.NoError(t, os.WriteFile(path, []byte(bad), 0o600))
		_, err = audit.LoadAnchor(path)
		require.ErrorContains(t, err, path, bad)
	}
}
