package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/convlog/convlog/agentd/serve"
	"github.com/convlog/convlog/audit"
)

// auditFlags configure serve's checkpointer.
type auditFlags struct {
	Enabled bool
	KeyFile string
}

func (a *auditFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&a.Enabled, "audit", true, "sign checkpoints of every thread's hash chain into the stream (package audit; docs/audit.md)")
	fs.StringVar(&a.KeyFile, "audit-key", os.Getenv("CONVLOG_AUDIT_KEY"), "Ed25519 signing key (PEM PKCS#8), created when missing (env CONVLOG_AUDIT_KEY; default <data-dir>/"+serve.AuditKeyFile+"; required with --nats-url)")
}

// keyPath is the signing key file: --audit-key, else the data
// directory's, else "" (external NATS without a key: no checkpoints).
func (a *auditFlags) keyPath(c *connFlags) string {
	return serve.AuditConfig{Enabled: a.Enabled, KeyFile: a.KeyFile}.KeyPath(*c)
}

// missingAuditKey says why a data directory has no audit key at path.
func missingAuditKey(dataDir, path string) error {
	if _, err := os.Stat(dataDir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("data directory %s does not exist (pass the --data-dir agentd serve runs on, or --nats-url with --public-key)", dataDir)
	}
	return fmt.Errorf("no audit key at %s: no agentd serve has run on it, so nothing was checkpointed "+
		"(import and the other commands store events but sign nothing); run agentd serve on it to create the key "+
		"and checkpoint the stored events, or pass --public-key", path)
}

func newAuditCmd(lf *logFlags) *cobra.Command {
	f := &cliFlags{}
	cmd := &cobra.Command{Use: "audit", Short: "Verify the log against its signed checkpoints",
		Example: `  agentd audit verify --data-dir ./convlog-data
  agentd audit key > audit.pub`}
	f.register(cmd)
	cmd.AddCommand(newAuditVerifyCmd(f, lf), newAuditKeyCmd(f))
	return cmd
}

func newAuditKeyCmd(f *cliFlags) *cobra.Command {
	var pubKey string
	cmd := &cobra.Command{Use: "key", Short: "Print the public key that verifies the checkpoints", Args: cobra.NoArgs,
		Example: `  agentd audit key --data-dir ./convlog-data > audit.pub
  agentd audit key --public-key audit.pub`,
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := trustedKey(pubKey, &f.conn)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n%s", audit.PublicKeyString(pub), audit.PublicKeyPEM(pub))
			return nil
		}}
	cmd.Flags().StringVar(&pubKey, "public-key", "", "print this key instead (checks that it parses)")
	return cmd
}

// trustedKey is the public key that verifies the checkpoints: pubKey (a
// key, or a file holding one) when given, else that of the signing key of
// the data directory c names.
func trustedKey(pubKey string, c *connFlags) (ed25519.PublicKey, error) {
	if pubKey != "" {
		if b, err := os.ReadFile(pubKey); err == nil {
			return audit.ParsePublicKey(string(b))
		}
		return audit.ParsePublicKey(pubKey)
	}
	path := (&auditFlags{}).keyPath(c)
	if path == "" {
		return nil, usageError{errors.New("--public-key is required with --nats-url (GET /v1/audit/key prints it)")}
	}
	key, err := audit.LoadKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, missingAuditKey(c.DataDir, path)
	}
	if err != nil {
		return nil, err
	}
	return key.Public().(ed25519.PublicKey), nil
}
