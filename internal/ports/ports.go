// Package ports finds free TCP ports on loopback for servers that tests
// and the benchmark start (nats-server nodes, their routes).
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Free returns a TCP port free on 127.0.0.1, picked below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default),
// so that no outgoing connection made meanwhile (a route dialing its
// peers, a client) can be given the same port as its local end: a port
// from Listen(":0") comes from that range, and one cluster test failed at
// start with "address already in use" because of it. Ports it returned
// before in this process are not returned again. It returns an error
// after 1,000 tries. Safe for concurrent use.
func Free() (int, error) {
	lo := EphemeralLow()
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		p := 10_000 + rand.IntN(lo-10_000)
		if given[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = l.Close()
		given[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("ports: no free port in 10000-%d after 1,000 tries", lo-1)
}

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// EphemeralLow is the lowest port of the kernel's ephemeral range, 32768
// when it cannot be read (Linux's default; other systems' ranges start
// higher).
func EphemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 11_000 {
		return 32768
	}
	return lo
}
