package datadir_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/datadir"
)

// One lock per directory: a second Acquire (another open file description,
// as in another process) fails with the owner's PID until the first is
// released.
func TestOneOwnerAtATime(t *testing.T) {
	dir := t.TempDir()
	l, err := datadir.Acquire(dir)
	require.NoError(t, err)
	_, err = datadir.Acquire(dir)
	var inUse *datadir.InUseError
	require.ErrorAs(t, err, &inUse)
	require.Equal(t, os.Getpid(), inUse.PID)
	require.Contains(t, err.Error(), "is in use by process")

	require.NoError(t, l.Publish(datadir.Owner{PID: os.Getpid(), NATSURL: "nats://127.0.0.1:1", StartedAt: time.Now()}))
	o, err := datadir.ReadOwner(dir)
	require.NoError(t, err)
	require.Equal(t, "nats://127.0.0.1:1", o.NATSURL)
	st, err := os.Stat(filepath.Join(dir, datadir.OwnerFile))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), st.Mode().Perm())

	l.Unlock()
	_, err = datadir.ReadOwner(dir)
	require.True(t, errors.Is(err, fs.ErrNotExist), "the owner record is withdrawn: %v", err)
	l2, err := datadir.Acquire(dir)
	require.NoError(t, err)
	l2.Unlock()
}

// A record left by an owner that died is removed by the next owner.
func TestAStaleOwnerRecordIsRemoved(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, datadir.OwnerFile), []byte(`{"pid":1}`), 0o600))
	l, err := datadir.Acquire(dir)
	require.NoError(t, err)
	defer l.Unlock()
	_, err = datadir.ReadOwner(dir)
	require.True(t, errors.Is(err, fs.ErrNotExist))
}

// The credentials are generated once, owner-only, and a seed that others
// may read is refused with the command that fixes it.
func TestCredentials(t *testing.T) {
	dir := t.TempDir()
	seed, pub, err := datadir.Credentials(dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, datadir.SeedFile), seed)
	require.Equal(t, byte('U'), pub[0], "an NKey user public key")
	for path, mode := range map[string]fs.FileMode{seed: 0o600, filepath.Join(dir, datadir.CredentialsDir): 0o700} {
		st, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, mode, st.Mode().Perm(), path)
	}
	_, pub2, err := datadir.Credentials(dir)
	require.NoError(t, err)
	require.Equal(t, pub, pub2, "generated once")

	require.NoError(t, os.Chmod(seed, 0o644))
	_, _, err = datadir.Credentials(dir)
	require.ErrorContains(t, err, "chmod 600 "+seed)
}
