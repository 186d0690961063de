package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// usageError marks errors caused by bad flags or arguments (exit code 2).
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// logFlags choose the slog handler.
type logFlags struct {
	Format string
	Level  string
}

func (l *logFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&l.Format, "log-format", envOr("CONVLOG_LOG_FORMAT", "text"), "log format: text or json (env CONVLOG_LOG_FORMAT)")
	cmd.PersistentFlags().StringVar(&l.Level, "log-level", envOr("CONVLOG_LOG_LEVEL", "info"), "log level: debug, info, warn, error (env CONVLOG_LOG_LEVEL)")
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level %q: %w", l.Level, err)}
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(l.Format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError{fmt.Errorf("--log-format %q: want text or json", l.Format)}
}

func newRootCmd() *cobra.Command {
	var lf logFlags
	root := &cobra.Command{
		Use:   "agentd",
		Short: "convlog: an event-sourced conversation log for AI agents over NATS JetStream",
		Long: `agentd runs convlog (serve) and operates on its threads directly over NATS
(thread, stream, import, verify, replay): on --data-dir they go through the
NATS of the 'agentd serve' that owns the directory, or run the embedded
JetStream themselves when none does; with --nats-url they work on an existing
deployment. A data directory has one owner at a time (an OS lock).

Exit codes: 0 success, 1 failure, 2 bad usage.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	lf.register(root)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newServeCmd(&lf))
	root.AddCommand(newThreadCmd(&lf))
	root.AddCommand(newStreamCmd(&lf))
	root.AddCommand(newAuditCmd(&lf))
	root.AddCommand(newRetentionCmd(&lf))
	root.AddCommand(newTLSCmd())
	root.AddCommand(newTenantCmd(&lf))
	root.AddCommand(newOperatorCmd(&lf))
	addImportCmds(root, &lf)
	return root
}

// stderrLogger builds the logger for CLI subcommands (to stderr).
func stderrLogger(lf *logFlags) (*slog.Logger, error) { return lf.logger(os.Stderr) }
