package memtune

import (
	"io"
	"log/slog"
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/require"
)

// collectorSettings reads this process's GOGC and soft memory limit.
func collectorSettings() (gogc, limit uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

func TestSetRaisesGOGCUnderALimitAndPutsBothBack(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gogc0, limit0 := collectorSettings()

	restore, err := Set(1<<40, 0, log)
	require.NoError(t, err)
	gogc, limit := collectorSettings()
	require.Equal(t, uint64(limitedGCPercent), gogc)
	require.Equal(t, uint64(1<<40), limit)
	restore()
	gogc, limit = collectorSettings()
	require.Equal(t, gogc0, gogc)
	require.Equal(t, limit0, limit)

	restore, err = Set(1<<40, 150, log)
	require.NoError(t, err)
	gogc, _ = collectorSettings()
	require.Equal(t, uint64(150), gogc, "a configured percentage")
	restore()
}

func TestSetRefusesGCOffWithoutALimit(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gogc0, limit0 := collectorSettings()

	restore, err := Set(-1, -1, log)
	require.ErrorIs(t, err, ErrGCOffWithoutLimit)
	require.Nil(t, restore)
	gogc, limit := collectorSettings()
	require.Equal(t, gogc0, gogc, "nothing set")
	require.Equal(t, limit0, limit, "nothing set")
}
