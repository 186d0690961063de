package memtune_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/memtune"
)

func TestMemoryLimitIsChosenFromTheFirstSourceThatGivesOne(t *testing.T) {
	const gib = 1 << 30
	cases := []struct {
		name       string
		configured int64
		env        string
		cgroup     string
		physical   uint64
		want       int64
		source     string
	}{
		{"a configured limit wins over everything", 3 * gib, "1GiB", "1073741824\n", 8 * gib, 3 * gib, "configured"},
		{"a negative configured limit sets none", -1, "", "1073741824\n", 8 * gib, 0, "off (configured)"},
		{"GOMEMLIMIT in the environment is left to the runtime", 0, "2GiB", "1073741824\n", 8 * gib, 0, "GOMEMLIMIT"},
		{"a cgroup limit gives 90% of it", 0, "", "1073741824\n", 8 * gib, 966367641, "cgroup memory.max"},
		{"a cgroup without a limit falls back to half the memory", 0, "", "max\n", 8 * gib, 4 * gib, "physical memory"},
		{"no cgroup file falls back to half the memory", 0, "", "", 8 * gib, 4 * gib, "physical memory"},
		{"nothing known sets none", 0, "", "", 0, 0, "unknown memory size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, source := memtune.MemoryLimit(c.configured, c.env, []byte(c.cgroup), c.physical)
			require.Equal(t, c.want, got)
			require.Equal(t, c.source, source)
		})
	}
}

func TestGCPercentIsChosenFromTheFirstSourceThatGivesOne(t *testing.T) {
	cases := []struct {
		name       string
		configured int
		env        string
		limited    bool
		want       int
		source     string
	}{
		{"a configured percentage wins over everything", 150, "50", true, 150, "configured"},
		{"a negative configured percentage turns the collector off", -1, "50", true, -1, "off (configured)"},
		{"GOGC in the environment is left to the runtime", 0, "50", true, 0, "GOGC"},
		{"a soft memory limit raises the percentage", 0, "", true, 400, "soft memory limit"},
		{"no soft memory limit leaves the runtime's", 0, "", false, 0, "no soft memory limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, source := memtune.GCPercent(c.configured, c.env, c.limited)
			require.Equal(t, c.want, got)
			require.Equal(t, c.source, source)
		})
	}
}
