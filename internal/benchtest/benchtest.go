// Package benchtest holds what the module's Go benchmarks measure with
// besides the testing package: the process's CPU time and the median of
// per-round figures. Test support: production code never imports it.
package benchtest

import (
	"slices"
	"syscall"
	"time"
)

// CPU is the CPU time (user and system, getrusage RUSAGE_SELF) this
// process has used so far; 0 when getrusage fails. A benchmark whose
// server is embedded counts the work of both sides, which stays
// meaningful when other processes compete for the CPU. Safe for
// concurrent use.
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Median is the median of x (for an even count, the upper of the two
// middle values); 0 when x is empty. x is not changed.
func Median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	x = slices.Clone(x)
	slices.Sort(x)
	return x[len(x)/2]
}
