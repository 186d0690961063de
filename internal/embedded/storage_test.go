package embedded

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"
)

func TestFenceFollowsTheDisk(t *testing.T) {
	type step struct{ used, free, limit uint64 }
	tests := []struct {
		name  string
		steps []step
	}{
		{"the first limit is the bytes stored plus half the free space", []step{
			{used: 1000, free: 400, limit: 1200},
		}},
		{"writes use the limit and leave it as it is", []step{
			{used: 1000, free: 400, limit: 1200},
			{used: 1150, free: 200, limit: 1200},
		}},
		{"a purge that frees nothing on disk lowers the limit by its bytes", []step{
			{used: 1000, free: 400, limit: 1200},
			{used: 300, free: 400, limit: 500},
		}},
		{"space the disk gets back raises the limit by half", []step{
			{used: 1000, free: 400, limit: 1200},
			{used: 300, free: 1000, limit: 800},
		}},
		{"the limit is never negative", []step{
			{used: 1000, free: 0, limit: 1000},
			{used: 1500, free: 0, limit: 1000},
			{used: 0, free: 0, limit: 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f fence
			for i, s := range tt.steps {
				require.Equal(t, int64(s.limit), f.update(s.used, s.free), "step %d", i)
			}
		})
	}
}

func TestFencedKeepsLowerLimits(t *testing.T) {
	own := map[string]server.JetStreamAccountLimits{
		"":   {MaxStore: -1, MaxMemory: -1, MaxStreams: 10},
		"R3": {MaxStore: 50, MaxMemory: 7},
	}
	got := fenced(own, 100)
	require.Equal(t, server.JetStreamAccountLimits{MaxStore: 100, MaxMemory: -1, MaxStreams: 10}, got[""])
	require.Equal(t, server.JetStreamAccountLimits{MaxStore: 50, MaxMemory: 7}, got["R3"])
	require.Equal(t, int64(-1), own[""].MaxStore, "own is left as it is")
}

func TestBallastIsWrittenWhenThereIsRoomAndDropped(t *testing.T) {
	dir := t.TempDir()
	st := &storage{dir: dir, reserve: 1}
	free, err := st.free()
	require.NoError(t, err)
	if free < BallastSize+1 {
		t.Fatalf("the temporary directory's disk has %d bytes free, the test needs %d", free, BallastSize+1)
	}
	require.NoError(t, st.keepBallast())
	fi, err := os.Stat(filepath.Join(dir, BallastName))
	require.NoError(t, err)
	require.Equal(t, int64(BallastSize), fi.Size())
	require.NoError(t, st.keepBallast(), "a ballast that is there is kept")
	st.dropBallast()
	_, err = os.Stat(filepath.Join(dir, BallastName))
	require.ErrorIs(t, err, os.ErrNotExist)

	st.reserve = free + 1<<40
	require.NoError(t, st.keepBallast())
	_, err = os.Stat(filepath.Join(dir, BallastName))
	require.ErrorIs(t, err, os.ErrNotExist, "no ballast where Reserve bytes would not stay free beside it")
}
