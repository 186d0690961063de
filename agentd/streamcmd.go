package main

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/convlog/convlog/internal/provision"
	"github.com/spf13/cobra"
)

func newStreamCmd(lf *logFlags) *cobra.Command {
	var f cliFlags
	cmd := &cobra.Command{Use: "stream", Short: "Inspect the JetStream stream and buckets",
		Example: `  agentd stream info --json`}
	f.register(cmd)
	info := &cobra.Command{Use: "info", Short: "Print the event stream's state and the KV buckets", Args: cobra.NoArgs,
		Example: `  agentd stream info --data-dir ./convlog-data
  agentd stream info --nats-url nats://n1:4222 --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				// Partition 0's stream and buckets at the top level; with
				// several partitions, every partition's under "partitions".
				var parts []map[string]any
				var texts []string
				for _, pc := range e.c.Partitions() {
					out, text, err := partitionInfo(ctx, e, pc.Config().Resources)
					if err != nil {
						return err
					}
					parts, texts = append(parts, out), append(texts, text)
				}
				out := maps.Clone(parts[0])
				if len(parts) > 1 {
					out["partitions"] = parts
				}
				if e.json {
					return e.printJSON(out)
				}
				for _, t := range texts {
					fmt.Fprint(e.out, t)
				}
				return nil
			})
		}}
	cmd.AddCommand(info)
	return cmd
}

// partitionInfo returns the state of one partition's stream, snapshot and
// index buckets as JSON fields and as text.
func partitionInfo(ctx context.Context, e *cliEnv, rc provision.Config) (map[string]any, string, error) {
	js := e.c.JetStream()
	st, err := js.Stream(ctx, rc.Stream)
	if err != nil {
		return nil, "", err
	}
	si, err := st.Info(ctx)
	if err != nil {
		return nil, "", err
	}
	out := map[string]any{"stream": map[string]any{"name": si.Config.Name, "subjects": si.Config.Subjects,
		"replicas": si.Config.Replicas, "messages": si.State.Msgs, "bytes": si.State.Bytes,
		"first_seq": si.State.FirstSeq, "last_seq": si.State.LastSeq, "threads": si.State.NumSubjects,
		"duplicate_window": si.Config.Duplicates.String(), "allow_atomic": si.Config.AllowAtomicPublish}}
	var text strings.Builder
	fmt.Fprintf(&text, "stream %s %v replicas=%d\n  messages %d  bytes %d  seq %d..%d  threads %d  dup-window %s  atomic %v\n",
		si.Config.Name, si.Config.Subjects, si.Config.Replicas, si.State.Msgs, si.State.Bytes, si.State.FirstSeq,
		si.State.LastSeq, si.State.NumSubjects, si.Config.Duplicates, si.Config.AllowAtomicPublish)
	for _, b := range []string{rc.SnapshotBucket, rc.IndexBucket} {
		kv, err := js.KeyValue(ctx, b)
		if err != nil {
			return nil, "", err
		}
		s, err := kv.Status(ctx)
		if err != nil {
			return nil, "", err
		}
		out[b] = map[string]any{"values": s.Values(), "bytes": s.Bytes()}
		fmt.Fprintf(&text, "kv %s: %d values, %d bytes\n", b, s.Values(), s.Bytes())
	}
	return out, text.String(), nil
}
