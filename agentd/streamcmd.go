package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

func newStreamCmd(lf *logFlags) *cobra.Command {
	var f cliFlags
	cmd := &cobra.Command{Use: "stream", Short: "Inspect the JetStream stream and buckets"}
	f.register(cmd)
	info := &cobra.Command{Use: "info", Short: "Print the event stream's state and the KV buckets", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				js := e.c.JetStream()
				rc := e.c.Config().Resources
				st, err := js.Stream(ctx, rc.Stream)
				if err != nil {
					return err
				}
				si, err := st.Info(ctx)
				if err != nil {
					return err
				}
				out := map[string]any{"stream": map[string]any{"name": si.Config.Name, "subjects": si.Config.Subjects,
					"replicas": si.Config.Replicas, "messages": si.State.Msgs, "bytes": si.State.Bytes,
					"first_seq": si.State.FirstSeq, "last_seq": si.State.LastSeq, "threads": si.State.NumSubjects,
					"duplicate_window": si.Config.Duplicates.String(), "allow_atomic": si.Config.AllowAtomicPublish}}
				for _, b := range []string{rc.SnapshotBucket, rc.IndexBucket} {
					kv, err := js.KeyValue(ctx, b)
					if err != nil {
						return err
					}
					s, err := kv.Status(ctx)
					if err != nil {
						return err
					}
					out[b] = map[string]any{"values": s.Values(), "bytes": s.Bytes()}
				}
				if e.json {
					return e.printJSON(out)
				}
				fmt.Fprintf(e.out, "stream %s %v replicas=%d\n  messages %d  bytes %d  seq %d..%d  threads %d  dup-window %s  atomic %v\n",
					si.Config.Name, si.Config.Subjects, si.Config.Replicas, si.State.Msgs, si.State.Bytes, si.State.FirstSeq,
					si.State.LastSeq, si.State.NumSubjects, si.Config.Duplicates, si.Config.AllowAtomicPublish)
				for _, b := range []string{rc.SnapshotBucket, rc.IndexBucket} {
					m := out[b].(map[string]any)
					fmt.Fprintf(e.out, "kv %s: %d values, %d bytes\n", b, m["values"], m["bytes"])
				}
				return nil
			})
		}}
	cmd.AddCommand(info)
	return cmd
}
