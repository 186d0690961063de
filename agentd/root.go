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

// printError prints err of the command cmd as agentd's last words: a usage
// error always in the same form, "agentd: usage: ..." and where the
// command's help is.
func printError(w io.Writer, cmd *cobra.Command, err error) {
	var u usageError
	if !errors.As(err, &u) {
		fmt.Fprintln(w, "agentd:", err)
		return
	}
	path := "agentd"
	if cmd != nil {
		path = cmd.CommandPath()
	}
	fmt.Fprintf(w, "agentd: usage: %v\nRun '%s --help' for usage.\n", err, path)
}

// usageArgs are the argument words of c's Use line without its flags:
// "get THREAD" has THREAD, "list [TENANT]" has [TENANT], "revoke TENANT
// [--user PUBLIC_KEY]" has TENANT, "init --dir DIR" none.
func usageArgs(c *cobra.Command) []string {
	var out []string
	words := strings.Fields(c.Use)
	for i := 1; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "--") || strings.HasPrefix(w, "[--") {
			if !strings.HasSuffix(w, "]") && !strings.Contains(w, "=") && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") && !strings.HasPrefix(words[i+1], "[") {
				i++ // the flag's value
			}
			continue
		}
		out = append(out, w)
	}
	return out
}

// checkUsage makes every wrong command line under c a usageError with one
// wording. A wrong number of arguments says what the command takes; a
// word that names no subcommand says so (commands with subcommands show
// their help when given none, and validate their arguments like any other
// command, so an unknown subcommand is bad usage too).
func checkUsage(c *cobra.Command) {
	if c.HasSubCommands() {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %s", args[0], cmd.CommandPath())
			if cmd.SuggestionsMinimumDistance <= 0 {
				cmd.SuggestionsMinimumDistance = 2
			}
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
			}
			return usageError{errors.New(msg)}
		}
		if c.Run == nil && c.RunE == nil {
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	} else if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if check(cmd, args) == nil {
				return nil
			}
			want := "no arguments"
			if a := usageArgs(cmd); len(a) > 0 {
				want = strings.Join(a, " ")
			}
			got := fmt.Sprintf("%d arguments", len(args))
			if len(args) == 1 {
				got = "1 argument"
			}
			return usageError{fmt.Errorf("%s takes %s, got %s", cmd.CommandPath(), want, got)}
		}
	}
	for _, s := range c.Commands() {
		checkUsage(s)
	}
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
	checkUsage(root)
	return root
}

// stderrLogger builds the logger for CLI subcommands (to stderr).
func stderrLogger(lf *logFlags) (*slog.Logger, error) { return lf.logger(os.Stderr) }
