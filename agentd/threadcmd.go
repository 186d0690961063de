package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

func newThreadCmd(lf *logFlags) *cobra.Command {
	f := &cliFlags{}
	cmd := &cobra.Command{
		Use:   "thread",
		Short: "Inspect and operate on threads directly over NATS (beside a running agentd or without one)",
		Example: `  agentd thread list --agent demo
  agentd thread get 0193f0c2-... --json
  agentd thread tail 0193f0c2-... --deltas
  agentd thread replay 0193f0c2-... --at-seq 42
  agentd thread fork 0193f0c2-... --at-seq 42
  agentd thread export 0193f0c2-... --format openai > thread.jsonl
  agentd thread delete 0193f0c2-...
  agentd thread erase 0193f0c2-... --yes`,
	}
	f.register(cmd)
	cmd.AddCommand(newThreadListCmd(f, lf), newThreadGetCmd(f, lf), newThreadTailCmd(f, lf),
		newThreadReplayCmd(f, lf), newThreadForkCmd(f, lf), newThreadExportCmd(f, lf),
		newThreadDeleteCmd(f, lf), newThreadUndeleteCmd(f, lf), newThreadEraseCmd(f, lf),
		newThreadRedactCmd(f, lf))
	return cmd
}

func newThreadListCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var opts client.ListOptions
	var md []string
	cmd := &cobra.Command{Use: "list", Short: "List threads, newest first", Args: cobra.NoArgs,
		Example: `  agentd thread list --agent demo --limit 20
  agentd thread list --meta source=tooltalk --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				return listThreads(ctx, e, opts, md)
			})
		}}
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "only threads of this agent")
	cmd.Flags().StringVar(&opts.Owner, "owner", "", "only threads of this owner/user")
	cmd.Flags().StringArrayVar(&md, "meta", nil, "only threads with metadata key=value (repeatable)")
	cmd.Flags().IntVar(&opts.Limit, "limit", 50, "page size")
	cmd.Flags().StringVar(&opts.Cursor, "cursor", "", "cursor from the previous page")
	cmd.Flags().BoolVar(&opts.IncludeDeleted, "deleted", false, "include soft-deleted threads")
	return cmd
}

// listThreads prints one page of e.tenant's threads that match opts and
// the key=value pairs of meta.
func listThreads(ctx context.Context, e *cliEnv, opts client.ListOptions, meta []string) error {
	for _, kv := range meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return usageError{fmt.Errorf("--meta %q: want key=value", kv)}
		}
		if opts.Metadata == nil {
			opts.Metadata = map[string]string{}
		}
		opts.Metadata[k] = v
	}
	page, err := e.c.List(ctx, e.tenant, opts)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(page)
	}
	tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tAGENT\tOWNER\tMESSAGES\tVERSION\tUPDATED\tTITLE")
	for _, t := range page.Threads {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", t.Thread, t.Agent, t.Owner, t.MessageCount, t.Version, t.UpdatedAt.Format(time.RFC3339), t.Title)
	}
	if page.NextCursor != "" {
		fmt.Fprintf(tw, "\nmore: --cursor %s\n", page.NextCursor)
	}
	return tw.Flush()
}

func newThreadGetCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var withEvents bool
	cmd := &cobra.Command{Use: "get THREAD", Short: "Print a thread (consistent read)", Args: exactArgs(1),
		Example: `  agentd thread get hello
  agentd thread get hello --events --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				opts := []client.GetOption{client.Consistent(), client.IncludeDeleted()}
				if withEvents {
					opts = append(opts, client.WithEvents())
				}
				return showThread(ctx, e, args[0], opts)
			})
		}}
	cmd.Flags().BoolVar(&withEvents, "events", false, "also print the raw events")
	return cmd
}

// showThread reads thread with opts and prints it.
func showThread(ctx context.Context, e *cliEnv, thread string, opts []client.GetOption) error {
	th, err := e.c.Get(ctx, e.tenant, thread, opts...)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(th)
	}
	printThread(e, th)
	return nil
}

func newThreadTailCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var opts client.WatchOptions
	cmd := &cobra.Command{Use: "tail THREAD", Short: "Follow a thread's events live (Ctrl-C to stop)", Args: exactArgs(1),
		Example: `  agentd thread tail hello
  agentd thread tail hello --after 42 --deltas`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				return tailThread(ctx, e, args[0], opts)
			})
		}}
	cmd.Flags().Uint64Var(&opts.After, "after", 0, "start after this sequence")
	cmd.Flags().BoolVar(&opts.Deltas, "deltas", false, "also print live token deltas")
	return cmd
}

// tailThread prints thread's updates as they come until ctx ends, a
// signal arrives or the watch fails.
func tailThread(ctx context.Context, e *cliEnv, thread string, opts client.WatchOptions) error {
	w, err := e.c.Watch(ctx, e.tenant, thread, opts)
	if err != nil {
		return err
	}
	defer w.Stop()
	ctx, stop := signalContext(ctx)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-w.C:
			if !ok {
				return w.Err()
			}
			printUpdate(e, u)
		}
	}
}

// printUpdate prints one update of a watch: a delta's content, or an
// event's sequence, time, type and summary.
func printUpdate(e *cliEnv, u client.Update) {
	switch {
	case u.Delta != nil && e.json:
		_ = e.printJSON(u.Delta)
	case u.Delta != nil:
		fmt.Fprint(e.out, u.Delta.Content)
	case u.Err != nil:
		fmt.Fprintf(e.out, "%6d  undecodable: %v\n", u.Event.Seq, u.Err)
	case e.json:
		_ = e.printJSON(map[string]any{"seq": u.Event.Seq, "event": u.Event.Event})
	default:
		fmt.Fprintf(e.out, "%6d  %s  %-18s %s\n", u.Event.Seq, u.Event.Time.Format(time.RFC3339Nano), u.Event.Type, summarize(u.Event.Payload))
	}
}

func newThreadReplayCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var atSeq uint64
	var asOf string
	cmd := &cobra.Command{Use: "replay THREAD", Short: "Print a thread as it was at a sequence or time, folded from the log", Args: exactArgs(1),
		Example: `  agentd thread replay hello --at-seq 42
  agentd thread replay hello --as-of 2026-11-28T12:00:00Z --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				opts, err := replayOptions(atSeq, asOf)
				if err != nil {
					return err
				}
				return showThread(ctx, e, args[0], opts)
			})
		}}
	cmd.Flags().Uint64Var(&atSeq, "at-seq", 0, "fold up to this stream sequence")
	cmd.Flags().StringVar(&asOf, "as-of", "", "fold events stored up to this time (RFC 3339)")
	return cmd
}

// replayOptions are the read options of 'thread replay': a usage error
// when neither --at-seq nor --as-of is given or --as-of does not parse.
func replayOptions(atSeq uint64, asOf string) ([]client.GetOption, error) {
	var opts []client.GetOption
	if atSeq != 0 {
		opts = append(opts, client.AtSeq(atSeq))
	}
	if asOf != "" {
		t, err := time.Parse(time.RFC3339Nano, asOf)
		if err != nil {
			return nil, usageError{fmt.Errorf("--as-of: %w", err)}
		}
		opts = append(opts, client.AsOf(t))
	}
	if len(opts) == 0 {
		return nil, usageError{fmt.Errorf("replay needs --at-seq or --as-of")}
	}
	return append(opts, client.IncludeDeleted()), nil
}

func newThreadForkCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var opts client.ForkOptions
	cmd := &cobra.Command{Use: "fork THREAD", Short: "Fork a thread at a sequence into a new thread", Args: exactArgs(1),
		Example: `  agentd thread fork hello --at-seq 42 --id hello-branch`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				return forkThread(ctx, e, args[0], opts)
			})
		}}
	cmd.Flags().Uint64Var(&opts.AtSeq, "at-seq", 0, "source sequence (0 = current)")
	cmd.Flags().StringVar(&opts.ThreadID, "id", "", "id of the new thread (default generated)")
	return cmd
}

// forkThread forks thread and prints the new thread's id.
func forkThread(ctx context.Context, e *cliEnv, thread string, opts client.ForkOptions) error {
	_, nt, v, err := e.c.Fork(ctx, e.tenant, thread, opts)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(map[string]any{"thread": nt, "version": v})
	}
	fmt.Fprintln(e.out, nt)
	return nil
}

func newThreadExportCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var format string
	var all, noProgress bool
	cmd := &cobra.Command{Use: "export [THREAD]", Short: "Write a thread (or with --all the whole tenant) as JSONL to stdout",
		Example: `  agentd thread export hello > hello.jsonl
  agentd thread export --all --format events --tenant acme > acme.jsonl`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) {
				return usageError{fmt.Errorf("export takes a THREAD or --all")}
			}
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				if all {
					n, err := exportTenant(ctx, e, client.ExportFormat(format), noProgress)
					e.logger.Info("exported", "tenant", e.tenant, "threads", n)
					return err
				}
				return e.c.ExportThread(ctx, e.tenant, args[0], client.ExportFormat(format), e.out)
			})
		}}
	cmd.Flags().StringVar(&format, "format", "openai", "openai (messages, re-importable with 'agentd import') or events (raw events, re-importable with 'agentd import --format events')")
	cmd.Flags().BoolVar(&all, "all", false, "export every thread of the tenant")
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "no progress bar with --all (none is drawn when stderr is not a terminal)")
	return cmd
}

func printThread(e *cliEnv, th *client.Thread) {
	fmt.Fprintf(e.out, "thread %s/%s  version %d  messages %d  agent %q  owner %q", th.Tenant, th.Thread, th.Version, th.MessageCount(), th.Agent, th.Owner)
	if th.Deleted {
		fmt.Fprint(e.out, "  DELETED")
	}
	fmt.Fprintln(e.out)
	if th.SystemPrompt != nil {
		fmt.Fprintf(e.out, "system: %s\n", oneLine(*th.SystemPrompt, 100))
	}
	for _, m := range th.Messages {
		who := string(m.Role)
		if m.Agent != "" {
			who += "(" + m.Agent + ")"
		}
		line := oneLine(m.Content.String(), 100)
		for _, c := range m.ToolCalls {
			line += fmt.Sprintf(" [call %s %s(%s)]", c.ID, c.Name, oneLine(c.Arguments, 60))
		}
		if m.Role == events.RoleTool {
			line = fmt.Sprintf("[result %s] %s", m.ToolCallID, line)
			if m.IsError {
				line += " (error)"
			}
		}
		fmt.Fprintf(e.out, "%6d  %-16s %s\n", m.Seq, who, line)
	}
	if len(th.Pending) > 0 {
		fmt.Fprintf(e.out, "pending tool calls: %d\n", len(th.Pending))
	}
	for _, r := range th.Rejections {
		fmt.Fprintf(e.out, "rejected seq %d (%s %s): %s\n", r.Seq, r.Type, r.Code, r.Reason)
	}
	for _, ev := range th.Events {
		fmt.Fprintf(e.out, "event %6d  %s  %-18s %s  %s\n", ev.Seq, ev.Time.Format(time.RFC3339Nano), ev.Type, ev.Producer, ev.ID)
	}
}

func summarize(p events.Payload) string {
	if m, ok := events.MessageOf(p); ok {
		s := oneLine(m.Content.String(), 80)
		for _, c := range m.ToolCalls {
			s += " [call " + c.Name + "]"
		}
		if m.ToolCallID != "" {
			s = "[result " + m.ToolCallID + "] " + s
		}
		return s
	}
	return ""
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// exportTenant writes every thread of e.tenant (deleted ones too) to e.out,
// as client.ExportTenant does, with a progress bar of threads: the thread
// list is read first (ids only) so that the bar has a total. It returns the
// number of threads written.
func exportTenant(ctx context.Context, e *cliEnv, format client.ExportFormat, noProgress bool) (int, error) {
	var ids []string
	for t, err := range e.c.ListAll(ctx, e.tenant, client.ListOptions{IncludeDeleted: true}) {
		if err != nil {
			return 0, err
		}
		ids = append(ids, t.Thread)
	}
	bar := newProgress(int64(len(ids)), "exporting", false, noProgress)
	for i, id := range ids {
		if err := e.c.ExportThread(ctx, e.tenant, id, format, e.out); err != nil {
			return i, fmt.Errorf("export %s/%s: %w", e.tenant, id, err)
		}
		bar.add(1)
	}
	bar.finish()
	return len(ids), nil
}
