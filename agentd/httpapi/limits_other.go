//go:build !unix

package httpapi

// fdLimit returns 0: the file descriptor limit is not known here.
func fdLimit() int64 { return 0 }
