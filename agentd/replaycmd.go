package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/convlog/convlog/agentd/replayrun"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/transcripts"
)

func newReplayRunCmd(lf *logFlags) *cobra.Command {
	var f cliFlags
	var cfg replayrun.Config
	cmd := &cobra.Command{
		Use:   "replay-run FILE.jsonl...",
		Short: "Replay recorded conversations through drivers, agent workers and a tool runner, and compare",
		Long: `replay-run proves the whole system on recorded conversations: for each
conversation a driver creates a thread with only its first user message; agent
workers running the replay model answer from the recording; a replay tool runner
appends the recorded tool results; the driver appends the simulated user's later
messages. All of them are separate writers sharing the thread with optimistic
concurrency. At the end every thread is compared with its recording; the
command exits 1 if any differs.`,
		Example: `  agentd replay-run testdata/conversations/*.jsonl
  agentd replay-run --pools 4 --json testdata/conversations/tooltalk.jsonl`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkInputFiles(args); err != nil {
				return err
			}
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				var convs []events.Conversation
				for _, file := range args {
					for c, err := range transcripts.Read(file) {
						if err != nil {
							return err
						}
						convs = append(convs, c)
					}
				}
				cfg.Logger = e.logger
				if f.Tenant != "default" {
					cfg.Tenant = f.Tenant
				}
				rep, err := replayrun.Run(ctx, e.c, e.conn.NC, convs, cfg)
				if err != nil {
					return err
				}
				if e.json {
					_ = e.printJSON(rep)
				} else {
					fmt.Fprintf(e.out, "replayed %d threads (%d events) in %.2fs (%.0f events/s) with %d worker pool(s): %d identical, %d differing\n",
						rep.Threads, rep.Events, rep.Seconds, rep.EventsPS, max(cfg.Pools, 1), rep.Identical, len(rep.Unresolved))
					fmt.Fprintf(e.out, "conflicts resolved: workers %d, drivers %d, tool runner %d; left over: %d\n",
						rep.WorkerConflicts, rep.DriverConflicts, rep.ToolConflicts, len(rep.Unresolved))
					for _, d := range rep.Unresolved {
						fmt.Fprintf(e.out, "  %s (thread %s): %s\n", d.ID, d.Thread, d.Reason)
					}
				}
				if len(rep.Unresolved) > 0 {
					return fmt.Errorf("%d thread(s) differ from their recording", len(rep.Unresolved))
				}
				return nil
			})
		},
	}
	f.register(cmd)
	f.conn.CreateDataDir = true
	cmd.Flags().IntVar(&cfg.Pools, "pools", 1, "worker pools sharing the work (as separate processes would)")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", 4, "concurrent turns per pool")
	cmd.Flags().IntVar(&cfg.Parallel, "parallel", 32, "conversations driven at once")
	cmd.Flags().DurationVar(&cfg.Timeout, "timeout", 0, "timeout per conversation (default 60s)")
	return cmd
}
