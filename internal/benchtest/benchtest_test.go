package benchtest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/benchtest"
)

func TestMedianLeavesItsInputAsItIs(t *testing.T) {
	x := []float64{5, 1, 4, 2}
	require.Equal(t, 4.0, benchtest.Median(x))
	require.Equal(t, []float64{5, 1, 4, 2}, x)
	require.Equal(t, 3.0, benchtest.Median([]float64{3, 9, 1}))
	require.Equal(t, 0.0, benchtest.Median(nil))
}

func TestCPUCountsThisProcesssWork(t *testing.T) {
	c0 := benchtest.CPU()
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	require.Greater(t, benchtest.CPU(), c0)
}
