// Package datadir makes one process the owner of a convlog data directory
// and lets other processes find it.
//
// A data directory holds the embedded NATS server's JetStream files. Two
// nats-server processes on the same files lose acknowledged writes (each
// keeps its own view of the block files and index, and the last to flush
// wins), so exactly one process may open them: the owner holds an OS lock
// (flock(2), LOCK_EX) on <dir>/convlog.lock for its whole life. The kernel
// drops the lock when the process exits, however it exits, so a crash never
// leaves a stale lock behind.
//
// The owner publishes how to reach it in <dir>/convlog.owner.json (mode
// 0600): its PID, its NATS client URL and the path of the NKey seed the
// embedded server requires. A process that finds the directory locked
// reads that file and connects to the owner's NATS instead of opening the
// files. The credentials live in <dir>/credentials/ (mode 0700, the seed
// 0600), generated on first use; only the directory's owning user can read
// them.
//
// Layout of a data directory:
//
//	convlog.lock              lock file; holds the owner's PID (text)
//	convlog.owner.json        the running owner's Owner, while it runs
//	credentials/agentd.nk     NKey user seed the embedded NATS requires
//	jetstream/                nats-server's store
//
// This package does not import nats-server; internal/embedded runs the
// server.
package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nkeys"
)

// File names inside a data directory.
const (
	// LockFile is the lock the owner holds for its life.
	LockFile = "convlog.lock"
	// OwnerFile is where the owner publishes its Owner record.
	OwnerFile = "convlog.owner.json"
	// CredentialsDir holds the embedded server's credentials (mode 0700).
	CredentialsDir = "credentials"
	// SeedFile is the NKey user seed, relative to the data directory.
	SeedFile = "credentials/agentd.nk"
)

// InUseError reports that another process owns the data directory.
type InUseError struct {
	// Dir is the data directory.
	Dir string
	// PID of the owner, 0 when it could not be read.
	PID int
}

func (e *InUseError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("data directory %s is in use by another process (its lock %s is held)", e.Dir, filepath.Join(e.Dir, LockFile))
	}
	return fmt.Sprintf("data directory %s is in use by process %d", e.Dir, e.PID)
}

// Lock is a held lock on a data directory. Release it with Unlock; the
// kernel releases it when the process exits.
type Lock struct {
	dir string
	f   *os.File
}

// Acquire takes the lock of dir without waiting. dir must exist. It
// returns *InUseError when another process (or another Lock in this
// process) holds it, and an error naming the file for any I/O failure. On
// success the lock file holds this process's PID.
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &InUseError{Dir: dir, PID: LockPID(dir)}
		}
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	// An owner record left by a process that died without withdrawing it
	// describes nobody now.
	_ = os.Remove(filepath.Join(dir, OwnerFile))
	return &Lock{dir: dir, f: f}, nil
}

// Withdraw removes the owner record, so that no new process attaches
// while the owner shuts down. The lock stays held. Safe on a nil Lock.
func (l *Lock) Withdraw() {
	if l == nil || l.f == nil {
		return
	}
	_ = os.Remove(filepath.Join(l.dir, OwnerFile))
}

// Unlock withdraws the owner record and releases the lock. Safe to call
// more than once and on a nil Lock.
func (l *Lock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	l.Withdraw()
	_ = l.f.Truncate(0)
	_ = l.f.Close() // closing the descriptor releases the flock
	l.f = nil
}

// Publish writes o as the owner record of the locked directory (mode
// 0600, written to a temporary file and renamed, so a reader never sees a
// partial record).
func (l *Lock) Publish(o Owner) error {
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(l.dir, OwnerFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("owner record: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(l.dir, OwnerFile)); err != nil {
		return fmt.Errorf("owner record: %w", err)
	}
	return nil
}

// LockPID returns the PID written in dir's lock file, or 0 when there is
// none (no lock file, empty, or not a number).
func LockPID(dir string) int {
	for range 20 { // the owner writes its PID right after taking the lock
		b, err := os.ReadFile(filepath.Join(dir, LockFile))
		if err != nil {
			return 0
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

// Owner is the record a running owner publishes in OwnerFile.
type Owner struct {
	// PID of the owning process.
	PID int `json:"pid"`
	// NATSURL is the embedded server's client URL, reachable from this
	// host (a wildcard listen address is given as 127.0.0.1).
	NATSURL string `json:"nats_url"`
	// Seed is the path of the NKey seed the server requires.
	Seed string `json:"nkey_seed"`
	// TLSCert is the server's certificate file when its listener uses
	// TLS; clients pin it.
	TLSCert string `json:"tls_cert,omitempty"`
	// StartedAt is when the owner published the record (UTC).
	StartedAt time.Time `json:"started_at"`
}

// ReadOwner reads dir's owner record. It returns an error wrapping
// fs.ErrNotExist when no owner has published one.
func ReadOwner(dir string) (Owner, error) {
	var o Owner
	b, err := os.ReadFile(filepath.Join(dir, OwnerFile))
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("owner record %s: %w", filepath.Join(dir, OwnerFile), err)
	}
	return o, nil
}

// Credentials returns the path of dir's NKey user seed and its public key,
// generating the seed on first use: the credentials directory is created
// with mode 0700 and the seed with 0600. It refuses a seed file that group
// or others may read (the error says how to fix it), since whoever reads it
// can read and write every tenant's threads over NATS.
func Credentials(dir string) (seedPath, publicKey string, err error) {
	seedPath = filepath.Join(dir, SeedFile)
	if err := os.MkdirAll(filepath.Join(dir, CredentialsDir), 0o700); err != nil {
		return "", "", fmt.Errorf("credentials: %w", err)
	}
	b, err := os.ReadFile(seedPath)
	if errors.Is(err, fs.ErrNotExist) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return "", "", fmt.Errorf("credentials: %w", err)
		}
		seed, _ := kp.Seed()
		if err := WriteNewSecret(seedPath, append(seed, '\n')); err != nil {
			return "", "", fmt.Errorf("credentials: %w", err)
		}
		b = seed
	} else if err != nil {
		return "", "", fmt.Errorf("credentials: %w", err)
	}
	st, err := os.Stat(seedPath)
	if err != nil {
		return "", "", fmt.Errorf("credentials: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", "", fmt.Errorf("credentials %s has mode %04o: group and others must not read it (chmod 600 %s)", seedPath, st.Mode().Perm(), seedPath)
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(b))))
	if err != nil {
		return "", "", fmt.Errorf("credentials %s: not an NKey user seed: %w", seedPath, err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", "", fmt.Errorf("credentials %s: %w", seedPath, err)
	}
	return seedPath, pub, nil
}

// WriteNewSecret writes data to a new file at path that only its owner
// may read or write (mode 0600), and syncs it: a key, a seed or
// credentials. A file already at path is left as it is and the error
// wraps fs.ErrExist, so a secret is never overwritten. Errors name path.
func WriteNewSecret(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err // *fs.PathError: names path
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}
