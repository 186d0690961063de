// Command agentd runs convlog: an embedded (or external) NATS JetStream, the
// projector, agent workers and the HTTP API, plus operator subcommands.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "agentd:", err)
		os.Exit(exitCode(err))
	}
}
