package natstest

import (
	"os"

	"github.com/nats-io/nats.go"

	"github.com/convlog/convlog/internal/embedded"
)

// RunExample starts an embedded JetStream server (what `agentd serve`
// runs) in a new temporary directory and connects to it, for runnable
// examples, which have no testing.T: it panics on an error. stop closes
// the connection, shuts the server down and removes the directory.
func RunExample() (nc *nats.Conn, stop func()) {
	dir, err := os.MkdirTemp("", "convlog-example-")
	if err != nil {
		panic(err)
	}
	s, err := embedded.Start(embedded.Config{StoreDir: dir})
	if err != nil {
		panic(err)
	}
	nc, err = s.Connect()
	if err != nil {
		s.Shutdown()
		panic(err)
	}
	return nc, func() { nc.Close(); s.Shutdown(); _ = os.RemoveAll(dir) }
}
