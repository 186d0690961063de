package embedded

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultStorageReserve is the free space the store's file system must
// have again before the store is no longer full.
const DefaultStorageReserve = 8 << 20

// BallastName is the file in the store directory that holds
// [BallastSize] bytes of the disk while it has room, for the writes that
// free space once it is full.
const BallastName = "storage.ballast"

// BallastSize is the size of the ballast file.
const BallastSize = 4 << 20

// fullPoll is how often the watcher takes the storage limit anew while
// the disk is full: a purge frees its bytes in JetStream's accounting at
// once, but not on disk, and until the limit is taken again they may be
// written anew.
const fullPoll = 100 * time.Millisecond

// noSpace is the text of ENOSPC in the server's log lines.
const noSpace = "no space left on device"

// storage keeps JetStream usable while the disk under the store is full.
//
// nats-server's file store meets "no space left on device" with a write
// error that sticks to the stream (or KV bucket) that met it: the stream
// stops answering publishes (they time out) and refuses every purge and
// message delete with that error until its store is opened again, so the
// space that an erasure would free cannot be freed. The error is only in
// the server's log, so the log adapter watches for it (ENOSPC's text),
// marks the store full and wakes the watcher, which:
//
//  1. Deletes the ballast (BallastName): its bytes are the room that
//     purges, deletes and their tombstones, and JetStream's restart, need
//     on a disk that has none left.
//  2. Restarts JetStream (shut down, enabled again with the same
//     configuration; streams, consumers and KV buckets are loaded from
//     disk with everything acknowledged) when a store met ENOSPC since
//     JetStream last started: opening the stores again clears their
//     write errors.
//  3. Limits the storage of the account that holds JetStream (the global
//     account) to the bytes it stores now plus half the disk's free space
//     (see fence), followed every fullPoll. A publish that would pass the
//     limit is refused at once (JetStream error 10002, resource limits
//     exceeded for account) instead of going unanswered, and one within
//     it finds room on disk: a soft delete's event, an erasure's marker.
//     The other half of the free space is for what JetStream writes
//     outside its accounting (tombstones, index files). Purged messages
//     count as freed at once, but their bytes stay on disk while other
//     messages share their block (nats-server drops a block when it is
//     empty, and compacts one more than half deleted that is not the
//     block being written at its next sync): the limit follows the disk,
//     not the accounting. Until the next poll sees a purge, what it freed
//     in the accounting can be written again; a write that then meets
//     ENOSPC goes through 2 (its request unanswered).
//  4. Once Reserve bytes are free (statfs), gives the account its own
//     limits back and marks the store not full. The ballast is written
//     again once Reserve bytes are free beside it.
//
// The watcher runs in one goroutine; noteLog is called from the server's
// goroutines, only signals, and never blocks.
type storage struct {
	full     atomic.Bool
	since    atomic.Int64 // unix nanoseconds the store became full
	reserve  uint64
	dir      string
	onChange func(full bool)
	done     chan struct{}

	// enospc counts the server's log lines that report ENOSPC: a store
	// that met it refuses writes until JetStream restarts.
	enospc   atomic.Uint64
	wakeOnce sync.Once
	wake     chan struct{} // buffered 1: the watcher has work
}

// wakeup returns the channel that wakes the watcher (made on first use:
// the log adapter may see a line before the watcher starts).
func (st *storage) wakeup() chan struct{} {
	st.wakeOnce.Do(func() { st.wake = make(chan struct{}, 1) })
	return st.wake
}

// noteLog marks the store full when a server log line reports ENOSPC and
// wakes the watcher.
func (st *storage) noteLog(msg string) {
	if st == nil || !strings.Contains(msg, noSpace) {
		return
	}
	st.enospc.Add(1)
	if st.full.CompareAndSwap(false, true) {
		st.since.Store(time.Now().UnixNano())
		if st.onChange != nil {
			go st.onChange(true)
		}
	}
	select {
	case st.wakeup() <- struct{}{}:
	default:
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

// ballast returns the path of the ballast file.
func (st *storage) ballast() string { return filepath.Join(st.dir, BallastName) }

// keepBallast writes the ballast file when it is missing and Reserve
// bytes stay free beside it. It writes zeros (not a sparse file): the
// blocks must be taken.
func (st *storage) keepBallast() error {
	if _, err := os.Stat(st.ballast()); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if free, err := st.free(); err != nil || free < st.reserve+BallastSize {
		return err
	}
	tmp := st.ballast() + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, BallastSize))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, st.ballast())
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// dropBallast deletes the ballast file (and one left half written).
func (st *storage) dropBallast() {
	_ = os.Remove(st.ballast() + ".tmp")
	_ = os.Remove(st.ballast())
}

// restart shuts JetStream down and enables it again with cfg.
func restart(s *server.Server, cfg server.JetStreamConfig) error {
	if err := s.ShutdownJetStream(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	c := cfg
	// EnableJetStream puts the "jetstream" directory under StoreDir
	// itself.
	c.StoreDir = filepath.Dir(cfg.StoreDir)
	return s.EnableJetStream(&c)
}

// limits returns the JetStream limits of acc, by tier.
func limits(acc *server.Account) map[string]server.JetStreamAccountLimits {
	u := acc.JetStreamUsage()
	if len(u.Tiers) == 0 {
		return map[string]server.JetStreamAccountLimits{"": u.Limits}
	}
	m := make(map[string]server.JetStreamAccountLimits, len(u.Tiers))
	for name, t := range u.Tiers {
		m[name] = t.Limits
	}
	return m
}

// fenced returns own with every tier's storage limited to maxStore (or
// its own limit, when lower).
func fenced(own map[string]server.JetStreamAccountLimits, maxStore int64) map[string]server.JetStreamAccountLimits {
	m := make(map[string]server.JetStreamAccountLimits, len(own))
	for name, l := range own {
		if l.MaxStore < 0 || l.MaxStore > maxStore {
			l.MaxStore = maxStore
		}
		m[name] = l
	}
	return m
}

// start writes the ballast and starts the watcher.
func (st *storage) start(s *server.Server, cfg server.JetStreamConfig) {
	if err := st.keepBallast(); err != nil {
		s.Warnf("JetStream store ballast %s: %v", st.ballast(), err)
	}
	go st.watch(s, cfg)
}

// watch keeps JetStream on s usable while the store is full (see
// storage); it returns when done closes.
func (st *storage) watch(s *server.Server, cfg server.JetStreamConfig) {
	t := time.NewTicker(fullPoll)
	defer t.Stop()
	var (
		started = st.enospc.Load() // ENOSPC lines when JetStream last started
		own     map[string]server.JetStreamAccountLimits
		f       fence
		checked time.Time // the ballast was last checked
	)
	for {
		select {
		case <-st.done:
			return
		case <-t.C:
		case <-st.wakeup():
		}
		if !st.full.Load() {
			if time.Since(checked) < time.Second {
				continue
			}
			checked = time.Now()
			if err := st.keepBallast(); err != nil {
				s.RateLimitWarnf("JetStream store ballast %s: %v", st.ballast(), err)
			}
			continue
		}
		st.dropBallast()
		if st.enospc.Load() != started {
			s.Warnf("JetStream store is full: restarting JetStream to clear its write errors")
			if err := restart(s, cfg); err != nil {
				s.Errorf("JetStream restart on a full disk: %v", err)
				continue
			}
			// Lines logged while JetStream restarted belong to the stores
			// just opened again.
			started = st.enospc.Load()
			f = fence{}
		}
		acc := s.GlobalAccount()
		if own == nil {
			own = limits(acc)
		}
		free, err := st.free()
		if err != nil {
			continue
		}
		if free >= st.reserve {
			if err := acc.UpdateJetStreamLimits(own); err != nil {
				s.Errorf("JetStream storage limit after a full disk: %v", err)
				continue
			}
			s.Noticef("JetStream store has free space again: storage limit lifted")
			own, f = nil, fence{}
			st.full.Store(false)
			if st.onChange != nil {
				st.onChange(false)
			}
			continue
		}
		limit := f.update(acc.JetStreamUsage().Store, free)
		if err := acc.UpdateJetStreamLimits(fenced(own, limit)); err != nil {
			s.Errorf("JetStream storage limit on a full disk: %v", err)
		}
	}
}

// fence is the storage limit while the disk is full, in JetStream's
// accounting: first the bytes stored plus half the free space, then
// lowered by what the accounting counts freed (a purge's bytes stay on
// disk until their blocks are dropped or compacted) and raised by half
// of what the disk gets back. Writes leave it as it is: they use what
// it allows.
type fence struct {
	set         bool
	limit       int64
	used, avail int64 // bytes stored and free when last updated
}

// update takes the bytes stored and free now and returns the limit.
func (f *fence) update(used, free uint64) int64 {
	u, a := int64(min(used, 1<<62)), int64(min(free, 1<<62))
	switch {
	case !f.set:
		f.set, f.limit = true, u+a/2
	default:
		if u < f.used {
			f.limit -= f.used - u
		}
		if a > f.avail {
			f.limit += (a - f.avail) / 2
		}
	}
	f.used, f.avail = u, a
	f.limit = max(f.limit, 0)
	return f.limit
}

// StorageFull reports whether the store's disk is full (a write failed
// with "no space left on device" and Config.StorageReserve bytes have not
// been free since), and since when. While it is full, the storage of the
// account that holds JetStream is limited to what the disk can take: a
// publish beyond that is refused at once (JetStream error 10002), and
// purges, deletes and small publishes work. Safe for concurrent use.
func (s *Server) StorageFull() (bool, time.Time) {
	if s.st == nil || !s.st.full.Load() {
		return false, time.Time{}
	}
	return true, time.Unix(0, s.st.since.Load())
}
