package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"

	"github.com/spf13/cobra"

	"github.com/convlog/convlog/agentd/importer"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/projector"
)

func addImportCmds(root *cobra.Command, lf *logFlags) {
	root.AddCommand(newImportCmd(lf), newVerifyCmd(lf), newReplayRunCmd(lf))
}

func newImportCmd(lf *logFlags) *cobra.Command {
	var f cliFlags
	var replies string
	var agent string
	var noProgress bool
	var format string
	cmd := &cobra.Command{
		Use:   "import FILE.jsonl...",
		Short: "Import OpenAI-format JSONL conversations (one per line) as threads",
		Long: `import stores each conversation of OpenAI-format JSONL files (one conversation
per line: {"source","id","meta","messages":[...]}, the format of
testdata/conversations and of 'agentd thread export --format openai') as one
thread: thread.created (the leading system message as the system prompt,
source and id as metadata) then one event per message, in atomic batches.
Thread and event ids are deterministic, so importing a file twice stores
nothing twice.

Imported history is a record, not new input: threads are created with
replies "off", so no agent worker answers a thread that ends on a user
message. Pass --replies auto (and --agent) to make them live.

With --data-dir (the default ./convlog-data, created if missing): when
'agentd serve' owns that directory, it writes through the server's NATS and
the server projects the threads; otherwise it runs the embedded JetStream
itself and projects the threads before it exits. With --nats-url it writes to
a running deployment, whose projector projects the threads.`,
		Example: `  agentd import testdata/conversations/*.jsonl
  agentd import --nats-url nats://127.0.0.1:4222 convs.jsonl --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rm := events.ReplyMode(replies)
			if rm != events.RepliesOff && rm != events.RepliesAuto {
				return usageError{fmt.Errorf("--replies %q: want off or auto", replies)}
			}
			if format != "openai" && format != "events" {
				return usageError{fmt.Errorf("--format %q: want openai or events", format)}
			}
			if err := checkInputFiles(args); err != nil {
				return err
			}
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				if format == "events" {
					tenant := ""
					if cmd.Flags().Changed("tenant") {
						tenant = e.tenant
					}
					return importEventFiles(ctx, e, args, tenant)
				}
				opts := client.ImportOptions{Tenant: e.tenant, Replies: rm, Agent: agent}
				return importConversationFiles(ctx, e, args, opts, !noProgress && !e.json)
			})
		},
	}
	f.register(cmd)
	f.conn.CreateDataDir = true
	cmd.Flags().StringVar(&replies, "replies", "off", "reply mode of the imported threads: off (a record) or auto (agents answer)")
	cmd.Flags().StringVar(&agent, "agent", "", "agent recorded on the imported threads")
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "no progress bar (none is drawn when stderr is not a terminal)")
	cmd.Flags().StringVar(&format, "format", "openai", "openai (conversations) or events (raw events, as written by 'agentd thread export --format events')")
	return cmd
}

// importEventFiles imports the raw events of files (as 'agentd thread
// export --format events' writes them) into their own tenants, or all into
// tenant when it is not "", and prints the totals. When this command owns
// the data directory it projects the threads before it returns.
func importEventFiles(ctx context.Context, e *cliEnv, files []string, tenant string) (err error) {
	if e.conn.Server != nil {
		// This command owns the data directory: nobody else
		// projects what it imports.
		stop, perr := startLocalProjector(ctx, e)
		if perr != nil {
			return perr
		}
		defer func() {
			if perr := stop(); perr != nil && err == nil {
				err = perr
			}
		}()
	}
	total, err := importer.EventFiles(ctx, e.c, files, tenant)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(total)
	}
	fmt.Fprintf(e.out, "imported %d threads, %d events (%d already present), %d rejected\n", total.Threads, total.Events, total.Already, total.Rejected)
	return nil
}

// importConversationFiles imports the OpenAI-format conversations of files
// with opts and prints the summary; an error when a conversation could not
// be imported. When this command owns the data directory it projects the
// threads before it returns.
func importConversationFiles(ctx context.Context, e *cliEnv, files []string, opts client.ImportOptions, progress bool) error {
	var stop func() error
	if e.conn.Server != nil {
		s, err := startLocalProjector(ctx, e)
		if err != nil {
			return err
		}
		stop = s
	}
	sum, err := importFiles(ctx, e, files, opts, progress)
	if stop != nil {
		if perr := stop(); perr != nil && err == nil {
			err = perr
		}
		sum.Projected = err == nil
	}
	if err != nil {
		return fmt.Errorf("%w (stopped after %d threads, %d events)", err, sum.Threads, sum.Events)
	}
	if e.json {
		_ = e.printJSON(sum)
	} else {
		printImportSummary(e.out, sum)
	}
	if sum.Failed > 0 {
		err = fmt.Errorf("%d conversation(s) could not be imported", sum.Failed)
	}
	return err
}

// checkInputFiles reports every file argument that is missing or is not
// a file, before a command opens a data directory or prints anything.
func checkInputFiles(files []string) error {
	var errs []error
	for _, f := range files {
		st, err := os.Stat(f)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			errs = append(errs, fmt.Errorf("%s does not exist", f))
		case err != nil:
			errs = append(errs, err)
		case st.IsDir():
			errs = append(errs, fmt.Errorf("%s is a directory: give its .jsonl files", f))
		}
	}
	return errors.Join(errs...)
}

// importFiles imports the conversations of files (importer.Conversations)
// with a progress bar on stderr unless progress is false.
func importFiles(ctx context.Context, e *cliEnv, files []string, opts client.ImportOptions, progress bool) (importer.Summary, error) {
	total, err := importer.FilesSize(files)
	if err != nil {
		return importer.Summary{Files: files}, err
	}
	bar := newProgress(total, "importing", true, !progress)
	sum, err := importer.Conversations(ctx, e.c, files, opts, bar.set, e.logger)
	if err == nil {
		bar.finish()
	}
	return sum, err
}

func printImportSummary(w io.Writer, s importer.Summary) {
	fmt.Fprintf(w, "imported %d threads (%d already present), %d events, %d bytes in %.2fs (%.0f events/s)",
		s.Threads, s.AlreadyImported, s.Events, s.Bytes, s.Seconds, s.EventsPerSecond)
	if s.Projected {
		fmt.Fprint(w, ", projected")
	}
	fmt.Fprintln(w)
	if s.Failed > 0 {
		fmt.Fprintf(w, "failed: %d\n", s.Failed)
		keys := make([]string, 0, len(s.Rejections))
		for k := range s.Rejections {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %4d  %s\n", s.Rejections[k], k)
		}
	} else {
		fmt.Fprintln(w, "rejections: 0")
	}
}

func newVerifyCmd(lf *logFlags) *cobra.Command {
	var f cliFlags
	var noProgress bool
	cmd := &cobra.Command{
		Use:   "verify FILE.jsonl...",
		Short: "Compare every imported thread with its source transcript",
		Long: `verify reads the conversations of the files, reads each one's thread
(consistent read: the log, not a possibly lagging snapshot) and compares system
prompt and every message byte for byte: role, content (null stays null), tool
calls (id, name, arguments), tool_call_id and name. It prints identical /
differing with the first difference, and exits 1 if any thread differs.`,
		Example: `  agentd verify testdata/conversations/*.jsonl`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkInputFiles(args); err != nil {
				return err
			}
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				rep, err := verifyFiles(ctx, e, args, !noProgress && !e.json)
				if err != nil {
					return err
				}
				if e.json {
					_ = e.printJSON(rep)
				} else {
					fmt.Fprintf(e.out, "threads %d: identical %d, differing %d\n", rep.Threads, rep.Identical, len(rep.Differing))
					for _, d := range rep.Differing {
						fmt.Fprintf(e.out, "  %s %s (thread %s): %s\n", d.File, d.ID, d.Thread, d.Diff)
					}
				}
				if len(rep.Differing) > 0 {
					return fmt.Errorf("%d thread(s) differ from their source", len(rep.Differing))
				}
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "no progress bar (none is drawn when stderr is not a terminal)")
	return cmd
}

// verifyFiles compares the thread of every conversation of files with the
// conversation (importer.Verify), with a progress bar on stderr unless
// progress is false.
func verifyFiles(ctx context.Context, e *cliEnv, files []string, progress bool) (importer.Report, error) {
	total, err := importer.FilesSize(files)
	if err != nil {
		return importer.Report{}, err
	}
	bar := newProgress(total, "verifying", true, !progress)
	rep, err := importer.Verify(ctx, e.c, e.tenant, files, bar.set)
	if err == nil {
		bar.finish()
	}
	return rep, err
}

// startLocalProjector runs the projector of e's stream in this process
// (projector.StartLocal): import with --data-dir owns the directory, so
// nobody else projects what it imports.
func startLocalProjector(ctx context.Context, e *cliEnv) (func() error, error) {
	rc := e.c.Config().Resources
	return projector.StartLocal(ctx, e.c.JetStream(), projector.Config{Stream: rc.Stream, SubjectPrefix: rc.SubjectPrefix,
		SnapshotBucket: rc.SnapshotBucket, IndexBucket: rc.IndexBucket, Logger: e.logger.With("component", "projector")})
}
