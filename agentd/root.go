package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/provision"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// usageError marks errors caused by bad flags or arguments (exit code 2).
type usageError struct{ error }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "agentd",
		Short:         "convlog: an event-sourced conversation log for AI agents over NATS JetStream",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd())
	return root
}

func newServeCmd() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run convlog on an embedded JetStream in --data-dir",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			s, err := embedded.Start(embedded.Config{StoreDir: dataDir})
			if err != nil {
				return err
			}
			defer s.Shutdown()
			nc, err := s.Connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			if err := ensure(ctx, nc); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "convlog: NATS JetStream at %s (data in %s); Ctrl-C to stop\n", s.ClientURL(), dataDir)
			<-ctx.Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "./convlog-data", "JetStream data directory of the embedded server")
	return cmd
}

var _ = provision.DefaultConfig
var _ context.Context
