// Package memtune chooses and applies the Go collector's settings that
// agentd serve runs under: a soft memory limit (runtime/debug.SetMemoryLimit)
// and the collector's target percentage under it (SetGCPercent, GOGC).
// agentd/serve applies them for the life of a run; the bench applies the
// same to measure convlog in process as agentd runs it.
package memtune

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Shares of the memory available to the process that [MemoryLimit] takes
// as the soft limit: most of a cgroup's limit, which is the process's own
// budget (the rest is the runtime's and the kernel's slack), and half of
// the machine's memory when there is no cgroup limit, since other
// processes share it.
const (
	cgroupMemoryShare   = 0.9
	physicalMemoryShare = 0.5
)

// limitedGCPercent is the collector's target percentage (GOGC) that
// [GCPercent] chooses under a soft memory limit. agentd serve holds the
// embedded server's message-block buffers, the projector and the HTTP API
// in one heap, and the projection's tail latency follows the collections
// of that heap (bench/NOTES.md, "Projection lag"): collecting at 5x the
// live heap instead of 2x makes them rarer, and the soft limit still
// bounds the heap, since the collector runs as often as needed near it.
const limitedGCPercent = 400

// cgroupMemoryMax is the cgroup v2 file of the process's memory limit.
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// MemoryLimit chooses the soft memory limit in bytes that agentd serve
// sets with runtime/debug.SetMemoryLimit, and says where it comes from;
// 0 means it sets none. The Go collector then runs more often as the
// heap nears the limit instead of letting it pass, and agentd serve holds
// the embedded server, the projector and the HTTP API in one heap. In
// this order:
//   - configured > 0 (serve.Config.MemoryLimit, --memory-limit-mib): that many
//     bytes;
//   - configured < 0: none;
//   - gomemlimit, the GOMEMLIMIT environment variable, not empty: none
//     (the runtime has applied it);
//   - cgroupMax, the content of the cgroup v2 memory.max file, a number
//     of bytes (not "max"): 90% of it;
//   - physical, the machine's memory in bytes (0: unknown): half of it.
//
// A pure function of its arguments.
func MemoryLimit(configured int64, gomemlimit string, cgroupMax []byte, physical uint64) (int64, string) {
	switch {
	case configured > 0:
		return configured, "configured"
	case configured < 0:
		return 0, "off (configured)"
	case gomemlimit != "":
		return 0, "GOMEMLIMIT"
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(string(cgroupMax)), 10, 64); err == nil && n > 0 {
		return int64(float64(n) * cgroupMemoryShare), "cgroup memory.max"
	}
	if physical > 0 {
		return int64(float64(physical) * physicalMemoryShare), "physical memory"
	}
	return 0, "unknown memory size"
}

// GCPercent chooses the collector's target percentage (GOGC) that agentd
// serve sets with runtime/debug.SetGCPercent, and says where it comes
// from; 0 means it leaves the runtime's own (GOGC, else 100). In this
// order:
//   - configured > 0 (serve.Config.GCPercent, --gc-percent): that;
//   - configured < 0: off (-1), the collector runs only as the heap nears
//     the soft memory limit;
//   - gogc, the GOGC environment variable, not empty: the runtime's;
//   - limited, a soft memory limit in force: 400 (limitedGCPercent);
//   - else the runtime's (100).
//
// A pure function of its arguments.
func GCPercent(configured int, gogc string, limited bool) (int, string) {
	switch {
	case configured > 0:
		return configured, "configured"
	case configured < 0:
		return -1, "off (configured)"
	case gogc != "":
		return 0, "GOGC"
	case limited:
		return limitedGCPercent, "soft memory limit"
	}
	return 0, "no soft memory limit"
}

// ErrGCOffWithoutLimit is [Set]'s error for a collector turned off in a
// process with no soft memory limit: its heap would grow without bound.
var ErrGCOffWithoutLimit = errors.New("--gc-percent -1 turns the collector off until the soft memory limit, and this process has none (set --memory-limit-mib or GOMEMLIMIT)")

// Set applies [MemoryLimit] for memoryLimit and then [GCPercent] for
// gcPercent to this process and logs both to log; these are the settings
// agentd serve runs under (serve.Config.MemoryLimit and GCPercent), and a
// process that measures convlog in process (the bench) applies them the
// same way. The returned func puts the previous settings back (serve.Run
// calls it when it returns, so that a process running Run more than once,
// a test, keeps its own). It fails with [ErrGCOffWithoutLimit], setting
// nothing, when gcPercent < 0 and no soft memory limit results. It
// changes process-wide settings: do not call it from concurrent
// goroutines.
func Set(memoryLimit int64, gcPercent int, log *slog.Logger) (func(), error) {
	restoreLimit := setMemoryLimit(memoryLimit, log)
	limited := debug.SetMemoryLimit(-1) < math.MaxInt64
	if gcPercent < 0 && !limited {
		restoreLimit()
		return nil, ErrGCOffWithoutLimit
	}
	pct, source := GCPercent(gcPercent, os.Getenv("GOGC"), limited)
	if pct == 0 {
		log.Info("collector's GOGC not set by agentd", "source", source)
		return restoreLimit, nil
	}
	prev := debug.SetGCPercent(pct)
	log.Info("collector's GOGC set", "percent", pct, "source", source)
	return func() {
		debug.SetGCPercent(prev)
		restoreLimit()
	}, nil
}

// setMemoryLimit applies [MemoryLimit] for configured to this process and
// logs it; the returned func puts the previous limit back.
func setMemoryLimit(configured int64, log *slog.Logger) func() {
	cg, _ := os.ReadFile(cgroupMemoryMax)
	limit, source := MemoryLimit(configured, os.Getenv("GOMEMLIMIT"), cg, physicalMemory())
	if limit <= 0 {
		log.Info("soft memory limit not set by agentd", "source", source)
		return func() {}
	}
	prev := debug.SetMemoryLimit(limit)
	log.Info("soft memory limit set", "bytes", limit, "source", source,
		"mib", fmt.Sprintf("%.0f", float64(limit)/(1<<20)))
	return func() { debug.SetMemoryLimit(prev) }
}
