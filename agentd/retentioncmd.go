package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/convlog/convlog/agentd/retention"
)

func newRetentionCmd(lf *logFlags) *cobra.Command {
	var f cliFlags
	cmd := &cobra.Command{Use: "retention", Short: "Retention policies: what they would erase",
		Example: `  agentd retention plan --retention-file retention.json`}
	f.register(cmd)
	var file string
	plan := &cobra.Command{Use: "plan", Short: "List the threads a retention file would erase now (a dry run: nothing changes)", Args: cobra.NoArgs,
		Example: `  agentd retention plan --retention-file retention.json --data-dir ./convlog-data`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return usageError{fmt.Errorf("--retention-file is required")}
			}
			rc, err := retention.LoadFile(file)
			if err != nil {
				return usageError{err}
			}
			rc.DryRun = true
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				enf, err := retention.New(e.c, rc)
				if err != nil {
					return err
				}
				acts, err := enf.Scan(ctx)
				if err != nil {
					return err
				}
				if e.json {
					return e.printJSON(acts)
				}
				erased := 0
				for _, a := range acts {
					if a.Kind == "keep" {
						fmt.Fprintf(e.out, "would compact and redact %s/%s up to seq %d (messages older than %s)\n", a.Tenant, a.Thread, a.UpToSeq, a.Limit)
						continue
					}
					erased++
					fmt.Fprintf(e.out, "would erase %s/%s: last event %s (idle %s, policy %s)\n", a.Tenant, a.Thread,
						a.LastEventAt.Format(time.RFC3339), a.Idle.Round(time.Second), a.Limit)
				}
				fmt.Fprintf(e.out, "%d thread(s) would be erased, %d compacted and redacted\n", erased, len(acts)-erased)
				return nil
			})
		}}
	plan.Flags().StringVar(&file, "retention-file", "", "the retention file (as agentd serve --retention-file)")
	cmd.AddCommand(plan)
	return cmd
}
