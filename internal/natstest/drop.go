package natstest

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// Dropper is a nats.CustomDialer whose connections swallow the first
// `left` publishes (PUB or HPUB, in the NATS protocol the client writes)
// whose subject starts with prefix: the server never sees them, as a
// request a recovering cluster leaves unanswered. seen counts the
// publishes to prefix, dropped or not.
type Dropper struct {
	prefix string
	// Left is how many publishes to the prefix are still to be dropped
	// (store a new count to drop more).
	Left atomic.Int32
	// Seen counts the publishes to the prefix, dropped or not; Dropped
	// those dropped.
	Seen, Dropped atomic.Int32
	// stall, when set, makes the Dropper swallow every publish to the
	// first subject under prefix it sees, and only those (Left unused).
	stall  bool
	target atomic.Pointer[string]
}

// drops reports whether a publish to subject (under the prefix) is
// swallowed.
func (d *Dropper) drops(subject string) bool {
	if !d.stall {
		return d.Left.Add(-1) >= 0
	}
	d.target.CompareAndSwap(nil, &subject)
	return *d.target.Load() == subject
}

// Dial dials address and wraps the connection (nats.CustomDialer).
func (d *Dropper) Dial(network, address string) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &dropConn{Conn: c, d: d}, nil
}

// dropConn is a connection of a Dropper. Write parses the client's
// protocol stream, which nats.go may split anywhere.
type dropConn struct {
	net.Conn
	d    *Dropper
	mu   sync.Mutex
	line []byte // a control line not ended yet
	skip int    // payload bytes (with CRLF) of a dropped publish still to come
	pass int    // payload bytes (with CRLF) of a forwarded publish still to come
}

func (c *dropConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	var out []byte
	for len(p) > 0 {
		switch {
		case c.skip > 0:
			k := min(c.skip, len(p))
			c.skip, p = c.skip-k, p[k:]
		case c.pass > 0:
			k := min(c.pass, len(p))
			out, c.pass, p = append(out, p[:k]...), c.pass-k, p[k:]
		default:
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				c.line, p = append(c.line, p...), nil
				continue
			}
			line := append(c.line, p[:i+1]...)
			c.line, p = nil, p[i+1:]
			subject, size, ok := parsePub(line)
			if ok && strings.HasPrefix(subject, c.d.prefix) {
				c.d.Seen.Add(1)
				if c.d.drops(subject) {
					c.d.Dropped.Add(1)
					c.skip = size + 2
					continue
				}
			}
			out = append(out, line...)
			if ok {
				c.pass = size + 2
			}
		}
	}
	if len(out) > 0 {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// parsePub reads "PUB <subject> [reply] <size>" or "HPUB <subject> [reply]
// <header size> <total size>": the subject and the payload's size.
func parsePub(line []byte) (string, int, bool) {
	f := strings.Fields(string(line))
	if len(f) < 3 || !strings.EqualFold(f[0], "PUB") && !strings.EqualFold(f[0], "HPUB") {
		return "", 0, false
	}
	size, err := strconv.Atoi(f[len(f)-1])
	return f[1], size, err == nil
}

// ConnectDropping connects to url through a [Dropper] that swallows the
// first n publishes to subjects starting with prefix; the connection is
// closed by t.Cleanup.
func ConnectDropping(t testing.TB, url, prefix string, n int) (*nats.Conn, *Dropper) {
	t.Helper()
	d := &Dropper{prefix: prefix}
	d.Left.Store(int32(n))
	nc, err := nats.Connect(url, nats.SetCustomDialer(d))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc, d
}

// ConnectStalling connects to url through a [Dropper] that swallows every
// publish to the first subject starting with prefix that the connection
// publishes to, and no other: with prefix "$JS.API.CONSUMER.MSG.NEXT.S."
// the first consumer of stream S that the connection pulls from never
// gets a pull request, as a consumer whose node restarted, while a later
// consumer is served. The connection is closed by t.Cleanup.
func ConnectStalling(t testing.TB, url, prefix string) (*nats.Conn, *Dropper) {
	t.Helper()
	d := &Dropper{prefix: prefix, stall: true}
	nc, err := nats.Connect(url, nats.SetCustomDialer(d))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc, d
}
