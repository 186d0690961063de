// Command agentd runs convlog: an embedded (or external) NATS JetStream, the
// projector, agent workers and the HTTP API, plus operator subcommands.
package main

import "os"

func main() {
	cmd, err := newRootCmd().ExecuteC()
	if err != nil {
		printError(os.Stderr, cmd, err)
		os.Exit(exitCode(err))
	}
}
