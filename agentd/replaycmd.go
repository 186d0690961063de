package main

import "github.com/spf13/cobra"

func newReplayRunCmd(lf *logFlags) *cobra.Command {
	return &cobra.Command{Use: "replay-run", Short: "not yet", Hidden: true}
}
