//go:build !linux

package memtune

// physicalMemory is the machine's memory in bytes: unknown (0) here, so
// MemoryLimit sets a limit only when configured or from a cgroup.
func physicalMemory() uint64 { return 0 }
