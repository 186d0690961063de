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
	var f cliFlags
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

	var listOpts client.ListOptions
	var md []string
	list := &cobra.Command{Use: "list", Short: "List threads, newest first", Args: cobra.NoArgs,
		Example: `  agentd thread list --agent demo --limit 20
  agentd thread list --meta source=tooltalk --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				for _, kv := range md {
					k, v, ok := strings.Cut(kv, "=")
					if !ok {
						return usageError{fmt.Errorf("--meta %q: want key=value", kv)}
					}
					if listOpts.Metadata == nil {
						listOpts.Metadata = map[string]string{}
					}
					listOpts.Metadata[k] = v
				}
				page, err := e.c.List(ctx, e.tenant, listOpts)
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
			})
		}}
	list.Flags().StringVar(&listOpts.Agent, "agent", "", "only threads of this agent")
	list.Flags().StringVar(&listOpts.Owner, "owner", "", "only threads of this owner/user")
	list.Flags().StringArrayVar(&md, "meta", nil, "only threads with metadata key=value (repeatable)")
	list.Flags().IntVar(&listOpts.Limit, "limit", 50, "page size")
	list.Flags().StringVar(&listOpts.Cursor, "cursor", "", "cursor from the previous page")
	list.Flags().BoolVar(&listOpts.IncludeDeleted, "deleted", false, "include soft-deleted threads")

	var events_ bool
	get := &cobra.Command{Use: "get THREAD", Short: "Print a thread (consistent read)", Args: exactArgs(1),
		Example: `  agentd thread get hello
  agentd thread get hello --events --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				opts := []client.GetOption{client.Consistent(), client.IncludeDeleted()}
				if events_ {
					opts = append(opts, client.WithEvents())
				}
				th, err := e.c.Get(ctx, e.tenant, args[0], opts...)
				if err != nil {
					return err
				}
				if e.json {
					return e.printJSON(th)
				}
				printThread(e, th)
				return nil
			})
		}}
	get.Flags().BoolVar(&events_, "events", false, "also print the raw events")

	var after uint64
	var deltas bool
	tail := &cobra.Command{Use: "tail THREAD", Short: "Follow a thread's events live (Ctrl-C to stop)", Args: exactArgs(1),
		Example: `  agentd thread tail hello
  agentd thread tail hello --after 42 --deltas`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				w, err := e.c.Watch(ctx, e.tenant, args[0], client.WatchOptions{After: after, Deltas: deltas})
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
				}
			})
		}}
	tail.Flags().Uint64Var(&after, "after", 0, "start after this sequence")
	tail.Flags().BoolVar(&deltas, "deltas", false, "also print live token deltas")

	var atSeq uint64
	var asOf string
	replay := &cobra.Command{Use: "replay THREAD", Short: "Print a thread as it was at a sequence or time, folded from the log", Args: exactArgs(1),
		Example: `  agentd thread replay hello --at-seq 42
  agentd thread replay hello --as-of 2026-11-28T12:00:00Z --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				var opts []client.GetOption
				if atSeq != 0 {
					opts = append(opts, client.AtSeq(atSeq))
				}
				if asOf != "" {
					t, err := time.Parse(time.RFC3339Nano, asOf)
					if err != nil {
						return usageError{fmt.Errorf("--as-of: %w", err)}
					}
					opts = append(opts, client.AsOf(t))
				}
				if len(opts) == 0 {
					return usageError{fmt.Errorf("replay needs --at-seq or --as-of")}
				}
				opts = append(opts, client.IncludeDeleted())
				th, err := e.c.Get(ctx, e.tenant, args[0], opts...)
				if err != nil {
					return err
				}
				if e.json {
					return e.printJSON(th)
				}
				printThread(e, th)
				return nil
			})
		}}
	replay.Flags().Uint64Var(&atSeq, "at-seq", 0, "fold up to this stream sequence")
	replay.Flags().StringVar(&asOf, "as-of", "", "fold events stored up to this time (RFC 3339)")

	var forkAt uint64
	var forkID string
	fork := &cobra.Command{Use: "fork THREAD", Short: "Fork a thread at a sequence into a new thread", Args: exactArgs(1),
		Example: `  agentd thread fork hello --at-seq 42 --id hello-branch`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				_, nt, v, err := e.c.Fork(ctx, e.tenant, args[0], client.ForkOptions{AtSeq: forkAt, ThreadID: forkID})
				if err != nil {
					return err
				}
				if e.json {
					return e.printJSON(map[string]any{"thread": nt, "version": v})
				}
				fmt.Fprintln(e.out, nt)
				return nil
			})
		}}
	fork.Flags().Uint64Var(&forkAt, "at-seq", 0, "source sequence (0 = current)")
	fork.Flags().StringVar(&forkID, "id", "", "id of the new thread (default generated)")

	var format string
	var all, noProgress bool
	export := &cobra.Command{Use: "export [THREAD]", Short: "Write a thread (or with --all the whole tenant) as JSONL to stdout",
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
	export.Flags().StringVar(&format, "format", "openai", "openai (messages, re-importable with 'agentd import') or events (raw events, re-importable with 'agentd import --format events')")
	export.Flags().BoolVar(&all, "all", false, "export every thread of the tenant")
	export.Flags().BoolVar(&noProgress, "no-progress", false, "no progress bar with --all (none is drawn when stderr is not a terminal)")

	var reason string
	del := &cobra.Command{Use: "delete THREAD", Short: "Soft-delete a thread (hidden, kept for audit, reversible with undelete)", Args: exactArgs(1),
		Example: `  agentd thread delete hello --reason "user request"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				v, err := e.c.Delete(ctx, e.tenant, args[0], reason)
				if err == nil {
					fmt.Fprintf(e.out, "deleted %s at version %d\n", args[0], v)
				}
				return err
			})
		}}
	del.Flags().StringVar(&reason, "reason", "", "why (recorded in the event)")
	undel := &cobra.Command{Use: "undelete THREAD", Short: "Reverse a soft delete", Args: exactArgs(1),
		Example: `  agentd thread undelete hello --reason "deleted by mistake"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				v, err := e.c.Undelete(ctx, e.tenant, args[0], reason)
				if err == nil {
					fmt.Fprintf(e.out, "undeleted %s at version %d\n", args[0], v)
				}
				return err
			})
		}}
	undel.Flags().StringVar(&reason, "reason", "", "why (recorded in the event)")
	var yes bool
	erase := &cobra.Command{Use: "erase THREAD", Short: "Irreversibly purge a thread's events, snapshot and index entry", Args: exactArgs(1),
		Example: `  agentd thread erase hello --reason "GDPR request 1234" --yes`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return usageError{fmt.Errorf("erase is irreversible: pass --yes")}
			}
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				rep, err := e.c.Erase(ctx, e.tenant, args[0], reason)
				if err != nil {
					return err
				}
				if e.json {
					return e.printJSON(rep)
				}
				fmt.Fprintf(e.out, "erased %s/%s: %d events (up to seq %d), snapshot keys %v, index keys %v, key destroyed %v\n",
					rep.Tenant, rep.Thread, rep.RemovedEvents, rep.LastSeq, rep.SnapshotKeys, rep.IndexKeys, rep.KeyDestroyed)
				return nil
			})
		}}
	erase.Flags().BoolVar(&yes, "yes", false, "confirm the irreversible erasure")
	erase.Flags().StringVar(&reason, "reason", "", "why (recorded in the erasure marker)")
	var redactSeq uint64
	var redactFields []string
	redact := &cobra.Command{Use: "redact THREAD", Short: "Irreversibly make one event's content (or some fields) unreadable, keeping the event", Args: exactArgs(1),
		Example: `  agentd thread redact hello --seq 42 --reason "pasted a password" --yes
  agentd thread redact hello --seq 42 --fields tool_calls.arguments --yes`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return usageError{fmt.Errorf("redaction is irreversible: pass --yes")}
			}
			if redactSeq == 0 {
				return usageError{fmt.Errorf("--seq is required: the stream sequence of the event to redact")}
			}
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				rep, err := e.c.Redact(ctx, e.tenant, args[0], redactSeq, redactFields, reason)
				if err != nil {
					return err
				}
				if e.json {
					return e.printJSON(rep)
				}
				fmt.Fprintf(e.out, "redacted %s/%s seq %d (%s %s): fields %v; recorded at seq %d\n",
					rep.Tenant, rep.Thread, rep.Seq, rep.Type, rep.EventID, rep.Fields, rep.Version)
				return nil
			})
		}}
	redact.Flags().BoolVar(&yes, "yes", false, "confirm the irreversible redaction")
	redact.Flags().Uint64Var(&redactSeq, "seq", 0, "stream sequence of the event to redact")
	redact.Flags().StringSliceVar(&redactFields, "fields", nil, "payload fields to redact (content, reasoning, tool_calls.arguments, metadata, value, title, system_prompt); default: every content field of the event")
	redact.Flags().StringVar(&reason, "reason", "", "why (recorded in the clear in the event.redacted event)")

	cmd.AddCommand(list, get, tail, replay, fork, export, del, undel, erase, redact)
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
