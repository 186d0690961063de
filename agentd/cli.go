package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/convlog/convlog/agentd/internal/natsconn"
	"github.com/convlog/convlog/client"
)

// cliEnv is what an operator subcommand gets: a client on NATS (the
// embedded JetStream in --data-dir, started for the command, or
// --nats-url), a logger and the output.
type cliEnv struct {
	c      *client.Client
	conn   *conn
	logger *slog.Logger
	out    io.Writer
	json   bool
	tenant string
}

// cliFlags are shared by operator subcommands.
type cliFlags struct {
	conn   connFlags
	JSON   bool
	Tenant string
}

func (f *cliFlags) register(cmd *cobra.Command) {
	registerConnFlags(&f.conn, cmd.PersistentFlags())
	cmd.PersistentFlags().BoolVar(&f.JSON, "json", false, "print JSON instead of tables")
	cmd.PersistentFlags().StringVar(&f.Tenant, "tenant", "default", "tenant of the threads")
}

// run opens NATS and a client (provisioning the stream and buckets when it
// runs the embedded server), calls fn, and closes everything.
func (f *cliFlags) run(cmd *cobra.Command, lf *logFlags, fn func(ctx context.Context, e *cliEnv) error) error {
	logger, err := stderrLogger(lf)
	if err != nil {
		return err
	}
	if err := f.conn.Validate(); err != nil {
		return usageError{err}
	}
	cn, err := f.conn.Open(logger, "agentd-cli", natsconn.RoleCommand)
	if err != nil {
		return err
	}
	defer cn.Close()
	ctx := cmd.Context()
	cl, err := f.conn.Client(ctx, cn, cliProvisions(&f.conn, cmd), false, "agentd-cli", logger)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(ctx, &cliEnv{c: cl, conn: cn, logger: logger, out: cmd.OutOrStdout(), json: f.JSON, tenant: f.Tenant})
}

// cliProvisions reports whether a command other than serve provisions
// the streams and buckets: always on the embedded server (the data
// directory's), and on --nats-url only when --replicas is given. A
// cluster's streams are provisioned by agentd serve with its --replicas;
// a command that provisioned with the default of 1 would scale them down.
func cliProvisions(f *connFlags, cmd *cobra.Command) bool {
	return f.NATSURL == "" || cmd.Flags().Changed("replicas")
}

func (e *cliEnv) printJSON(v any) error {
	enc := json.NewEncoder(e.out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// exactArgs accepts exactly n arguments; checkUsage words the error.
func exactArgs(n int) cobra.PositionalArgs { return cobra.ExactArgs(n) }
