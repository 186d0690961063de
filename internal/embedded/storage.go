package embedded

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultStorageReserve is the free space the store's file system must
// have again before JetStream is restarted after a full disk.
const DefaultStorageReserve = 8 << 20

// storage tracks a full disk under the store and restarts JetStream when
// space returns.
//
// nats-server's file store meets "no space left on device" with a
// critical write error that sticks: the stream stops answering publishes
// (they time out) and stays so after space is freed, until JetStream
// restarts. The error is only in the server's log, so the log adapter
// watches for it (ENOSPC's text) and marks the store full; a watcher then
// polls the file system (statfs) once a second and, once Reserve bytes
// are free, shuts JetStream down and enables it again with the same
// configuration: streams, consumers and KV buckets are loaded from disk,
// with everything acknowledged before the disk filled.
type storage struct {
	full     atomic.Bool
	since    atomic.Int64 // unix nanoseconds the store became full
	reserve  uint64
	dir      string
	onChange func(full bool)
	done     chan struct{}
}

// noteLog marks the store full when a server log line reports ENOSPC.
func (st *storage) noteLog(msg string) {
	if st == nil || !strings.Contains(msg, "no space left on device") {
		return
	}
	if st.full.CompareAndSwap(false, true) {
		st.since.Store(time.Now().UnixNano())
		if st.onChange != nil {
			go st.onChange(true)
		}
	}
}

// free returns the bytes available to this process on the store's file
// system.
func (st *storage) free() (uint64, error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(st.dir, &fs); err != nil {
		return 0, err
	}
	return fs.Bavail * uint64(fs.Bsize), nil
}

// watch restarts JetStream on s once the store is full and has Reserve
// bytes free again; it returns when done closes.
func (st *storage) watch(s *server.Server, cfg server.JetStreamConfig) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-st.done:
			return
		case <-t.C:
		}
		if !st.full.Load() {
			continue
		}
		if free, err := st.free(); err != nil || free < st.reserve {
			continue
		}
		s.Warnf("JetStream store has free space again: restarting JetStream")
		if err := s.ShutdownJetStream(); err != nil {
			s.Errorf("JetStream restart after a full disk: shutdown: %v", err)
			continue
		}
		c := cfg
		// EnableJetStream puts the "jetstream" directory under StoreDir
		// itself.
		c.StoreDir = filepath.Dir(cfg.StoreDir)
		if err := s.EnableJetStream(&c); err != nil {
			s.Errorf("JetStream restart after a full disk: %v", err)
			continue
		}
		st.full.Store(false)
		if st.onChange != nil {
			st.onChange(false)
		}
	}
}

// StorageFull reports whether the store's disk is full (a write failed
// with "no space left on device" and JetStream has not been restarted
// since), and since when. Safe for concurrent use.
func (s *Server) StorageFull() (bool, time.Time) {
	if s.st == nil || !s.st.full.Load() {
		return false, time.Time{}
	}
	return true, time.Unix(0, s.st.since.Load())
}
