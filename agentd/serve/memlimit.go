package serve

import (
	"fmt"
	"log/slog"
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

// cgroupMemoryMax is the cgroup v2 file of the process's memory limit.
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// MemoryLimit chooses the soft memory limit in bytes that agentd serve
// sets with runtime/debug.SetMemoryLimit, and says where it comes from;
// 0 means it sets none. The Go collector then runs more often as the
// heap nears the limit instead of letting it pass, and agentd serve holds
// the embedded server, the projector and the HTTP API in one heap. In
// this order:
//   - configured > 0 ([Config.MemoryLimit], --memory-limit-mib): that many
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

// setMemoryLimit applies [MemoryLimit] for configured to this process and
// logs it; the returned func puts the previous limit back (Run calls it
// when it returns, so that a process running Run more than once, a test,
// keeps its own).
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
