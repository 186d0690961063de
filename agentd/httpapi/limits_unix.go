//go:build unix

package httpapi

import "syscall"

// fdLimit returns the process's RLIMIT_NOFILE (the soft limit, which the
// Go runtime raises to the hard limit at start), 0 when unknown.
func fdLimit() int64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<40 {
		return 0
	}
	return int64(rl.Cur)
}
