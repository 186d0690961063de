package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/convlog/convlog/agentd/internal/tlsfiles"
	"github.com/spf13/cobra"
)

func newTLSCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tls", Short: "TLS certificates for a deployment (the NATS cluster's client and route listeners, the HTTP API)",
		Example: `  agentd tls init --dir ./tls --hosts n1,n2,n3,localhost,127.0.0.1`}
	var dir, hosts string
	var days int
	initCmd := &cobra.Command{Use: "init", Short: "Create a CA and a certificate for the given hosts in --dir, unless they exist",
		Long: `init writes, in --dir, a private CA (ca.pem, ca-key.pem) and one certificate signed by it
(server.pem, server-key.pem; ECDSA P-256) valid for every name and address of --hosts, for both
server and client authentication, so that the same files serve the NATS client listener, the
cluster routes (mutual TLS) and the HTTP API. Clients trust ca.pem (agentd --tls-ca). Files
that exist are kept: running it again (a compose init step) changes nothing. docker-compose.yml
runs it once into the tls volume.`,
		Example: `  agentd tls init --dir ./tls --hosts n1,n2,n3,localhost,127.0.0.1
  agentd tls init --dir ./tls --hosts api.example.com --days 365`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{errors.New("--dir is required")}
			}
			names := strings.FieldsFunc(hosts, func(r rune) bool { return r == ',' || r == ' ' })
			if len(names) == 0 {
				return usageError{errors.New("--hosts is required: the names and addresses the certificate is for")}
			}
			created, err := tlsfiles.Create(dir, names, time.Duration(days)*24*time.Hour)
			if err != nil {
				return err
			}
			if created {
				fmt.Fprintf(cmd.OutOrStdout(), "created %s, %s and %s in %s for %s\n", tlsfiles.CAFile, tlsfiles.ServerFile, tlsfiles.ServerKeyFile, dir, strings.Join(names, ", "))
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "kept the certificates in %s\n", dir)
			}
			return nil
		}}
	initCmd.Flags().StringVar(&dir, "dir", "", "directory of the files (created if missing)")
	initCmd.Flags().StringVar(&hosts, "hosts", "", "comma-separated DNS names and IP addresses of the certificate")
	initCmd.Flags().IntVar(&days, "days", 825, "validity in days")
	cmd.AddCommand(initCmd)
	return cmd
}
