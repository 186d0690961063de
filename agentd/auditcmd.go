package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// auditKeyFile is the signing key's place in a data directory.
const auditKeyFile = "credentials/audit-ed25519.pem"

// auditFlags configure serve's checkpointer.
type auditFlags struct {
	Enabled bool
	KeyFile string
}

func (a *auditFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&a.Enabled, "audit", true, "sign checkpoints of every thread's hash chain into the stream (package audit; docs/audit.md)")
	fs.StringVar(&a.KeyFile, "audit-key", os.Getenv("CONVLOG_AUDIT_KEY"), "Ed25519 signing key (PEM PKCS#8), created when missing (env CONVLOG_AUDIT_KEY; default <data-dir>/"+auditKeyFile+"; required with --nats-url)")
}

// keyPath is the signing key file: --audit-key, else the data
// directory's, else "" (external NATS without a key: no checkpoints).
func (a *auditFlags) keyPath(c *connFlags) string {
	if a.KeyFile != "" {
		return a.KeyFile
	}
	if c.NATSURL == "" && c.DataDir != "" {
		return filepath.Join(c.DataDir, auditKeyFile)
	}
	return ""
}

// startAudit loads (or creates) the signing key and returns the
// checkpointer to run, or nil when audit is off.
func startAudit(f *serveFlags, cl *client.Client, logger *slog.Logger, m *metrics) ([]*audit.Checkpointer, error) {
	if !f.Audit.Enabled {
		logger.Warn("audit checkpoints are off (--audit=false): nothing signs the threads' hash chains")
		return nil, nil
	}
	path := f.Audit.keyPath(&f.conn)
	if path == "" {
		logger.Warn("audit checkpoints are off: with --nats-url give --audit-key (or CONVLOG_AUDIT_KEY) to sign them")
		return nil, nil
	}
	key, created, err := audit.LoadOrCreateKey(path)
	if err != nil {
		return nil, err
	}
	if created {
		logger.Info("audit signing key created", "path", path)
	}
	var cps []*audit.Checkpointer
	for part, pa := range httpapi.AuditPartitions(cl, audit.Scope{}) {
		cp, err := audit.NewCheckpointer(cl.JetStream(), audit.Config{Key: key, Stream: pa.Stream, SubjectPrefix: pa.SubjectPrefix, HeadsBucket: pa.HeadsBucket,
			Logger: logger.With("component", "audit", "partition", part), OnCheckpoint: m.onCheckpoint, OnRestart: func(error) { m.auditRestarts.Inc() }})
		if err != nil {
			return nil, err
		}
		cps = append(cps, cp)
	}
	return cps, nil
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
	var f cliFlags
	cmd := &cobra.Command{Use: "audit", Short: "Verify the log against its signed checkpoints",
		Example: `  agentd audit verify --data-dir ./convlog-data
  agentd audit key > audit.pub`}
	f.register(cmd)
	var (
		thread, pubKey, anchorHash, stateFile string
		anchorSeq                             uint64
		interval, maxLag                      time.Duration
	)
	trusted := func() (ed25519.PublicKey, error) {
		if pubKey != "" {
			if b, err := os.ReadFile(pubKey); err == nil {
				return audit.ParsePublicKey(string(b))
			}
			return audit.ParsePublicKey(pubKey)
		}
		path := (&auditFlags{}).keyPath(&f.conn)
		if path == "" {
			return nil, usageError{errors.New("--public-key is required with --nats-url (GET /v1/audit/key prints it)")}
		}
		key, err := audit.LoadKey(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, missingAuditKey(f.conn.DataDir, path)
		}
		if err != nil {
			return nil, err
		}
		return key.Public().(ed25519.PublicKey), nil
	}
	verify := &cobra.Command{Use: "verify", Short: "Re-read the log and the checkpoints; exit 1 when anything differs", Args: cobra.NoArgs,
		Long: `verify re-reads the checkpoints and the stored events (the whole stream, one
--tenant, or one --thread of --tenant), recomputes every thread's hash chain,
checks each checkpoint's signature and place in the checkpoint chain, and
prints what differs, by stream sequence. Exit code 1 when anything does: an
event altered, missing (and its thread not erased) or inserted into a range
a checkpoint covers, a checkpoint altered or missing, or events that no
checkpoint covers though one should by now (uncovered: they and the newest
checkpoint are older than the cadence it records, a second for agentd
serve, plus --max-lag, so the checkpoints were removed or no checkpointer
runs; or a checkpoint starts after events no earlier one covers). Erased
threads are listed, not counted as problems. Other events after the last
checkpoint are counted as unsigned.

A clean run proves that every stored event is as it was when the key
signed it, at most a second after it was stored. It cannot tell an event
published with the server's own credentials before its checkpoint from a
real one:
the checkpointer signs what the stream holds. Keep --state-file where those
credentials cannot write (docs/audit.md, "What a clean verification
proves").`,
		Example: `  agentd audit verify --data-dir ./convlog-data
  agentd audit verify --tenant acme --thread t1 --json
  agentd audit verify --nats-url nats://n1:4222 --public-key audit.pub --anchor-seq 812 --anchor-hash 5e0c...`,
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := trusted()
			if err != nil {
				return err
			}
			scope := audit.Scope{}
			if cmd.Flags().Changed("tenant") || thread != "" {
				scope.Tenant = f.Tenant
				if err := events.ValidateTenant(scope.Tenant); err != nil {
					return usageError{err}
				}
			}
			if thread != "" {
				id, _, err := events.ThreadIDFor(thread)
				if err != nil {
					return usageError{err}
				}
				scope.Thread = id
			}
			if interval <= 0 || maxLag <= 0 {
				return usageError{errors.New("--checkpoint-interval and --max-lag must be positive durations")}
			}
			opts := audit.VerifyOptions{Trusted: []ed25519.PublicKey{pub}, Stream: f.conn.Stream, SubjectPrefix: f.conn.Prefix,
				Interval: interval, MaxLag: maxLag}
			if (anchorSeq == 0) != (anchorHash == "") {
				return usageError{errors.New("--anchor-seq and --anchor-hash go together")}
			}
			if anchorSeq != 0 {
				opts.Anchor = &audit.Anchor{MsgSeq: anchorSeq, Hash: anchorHash}
			}
			if stateFile != "" {
				if opts.Anchor != nil {
					return usageError{errors.New("--state-file keeps its own anchor: give it or --anchor-seq/--anchor-hash, not both")}
				}
				a, err := readAnchor(stateFile)
				if err != nil {
					return err
				}
				opts.Anchor = a
			}
			var rep *audit.Report
			err = f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				var err error
				if rep, err = audit.VerifyPartitions(ctx, e.c.JetStream(), scope, opts, httpapi.AuditPartitions(e.c, scope)); err != nil {
					return err
				}
				if e.json {
					return e.printJSON(rep)
				}
				printReport(e, rep)
				return nil
			})
			if err != nil {
				return err
			}
			if !rep.OK {
				return verifyFailure(rep)
			}
			if stateFile != "" && rep.LastCheckpoint != nil {
				return writeAnchor(stateFile, rep.LastCheckpoint.Anchor)
			}
			return nil
		}}
	verify.Flags().StringVar(&thread, "thread", "", "verify one thread of --tenant (any id; external ids are mapped)")
	verify.Flags().StringVar(&pubKey, "public-key", "", "trusted public key: base64, PEM, or a file of either (default: the data directory's audit key)")
	verify.Flags().StringVar(&stateFile, "state-file", "", "keep the last verified checkpoint in this file: each run must find it in the stream as it was (a rewritten log fails) and, when clean, records the new one (as immudb clients keep their last verified state)")
	verify.Flags().Uint64Var(&anchorSeq, "anchor-seq", 0, "a checkpoint trusted earlier: its message's stream sequence (a report's last_checkpoint.msg_seq)")
	verify.Flags().StringVar(&anchorHash, "anchor-hash", "", "that checkpoint's body hash (last_checkpoint.hash)")
	verify.Flags().DurationVar(&interval, "checkpoint-interval", audit.DefaultInterval, "the checkpoint cadence assumed when the stream holds no signed checkpoint recording its own (each checkpoint records its checkpointer's)")
	verify.Flags().DurationVar(&maxLag, "max-lag", audit.DefaultMaxLag, "the grace beyond the cadence: events no checkpoint covers fail the verification (uncovered) once they and the newest checkpoint are older than the cadence plus this")
	key := &cobra.Command{Use: "key", Short: "Print the public key that verifies the checkpoints", Args: cobra.NoArgs,
		Example: `  agentd audit key --data-dir ./convlog-data > audit.pub
  agentd audit key --public-key audit.pub`,
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := trusted()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n%s", audit.PublicKeyString(pub), audit.PublicKeyPEM(pub))
			return nil
		}}
	key.Flags().StringVar(&pubKey, "public-key", "", "print this key instead (checks that it parses)")
	cmd.AddCommand(verify, key)
	return cmd
}

func printReport(e *cliEnv, r *audit.Report) {
	scope := "the whole stream"
	switch {
	case r.Scope.Thread != "":
		scope = "thread " + r.Scope.Tenant + "/" + r.Scope.Thread
	case r.Scope.Tenant != "":
		scope = "tenant " + r.Scope.Tenant
	}
	verdict := "OK"
	if !r.OK {
		verdict = fmt.Sprintf("FAILED: %d problem(s), the first at stream sequence %d", r.ProblemCount, r.FirstBadSeq)
	}
	fmt.Fprintf(e.out, "audit of %s: %s\n  %d thread(s), %d event(s) verified against %d checkpoint(s), %d after the last checkpoint (unsigned yet), %.2fs\n",
		scope, verdict, r.Threads, r.Verified, r.Checkpoints, r.Unsigned, r.Took)
	if c := r.LastCheckpoint; c != nil {
		fmt.Fprintf(e.out, "  last checkpoint: message %d, covers up to %d, %s, hash %s (keep it: --anchor-seq %d --anchor-hash %s)\n",
			c.MsgSeq, c.Seq, c.Time.Format("2006-01-02T15:04:05Z07:00"), c.Hash, c.MsgSeq, c.Hash)
	}
	for _, er := range r.Erased {
		fmt.Fprintf(e.out, "  erased: %s (%d checkpointed event(s) gone; marker at %d)\n", er.Subject, er.Events, er.MarkerSeq)
	}
	for _, rd := range r.Redacted {
		if rd.UpToSeq != 0 {
			fmt.Fprintf(e.out, "  redacted up to seq %d: %s, every event with content (%s; recorded at %d)\n", rd.UpToSeq, rd.Subject, rd.Reason, rd.MarkerSeq)
			continue
		}
		fmt.Fprintf(e.out, "  redacted at seq %d: %s event %s, fields %s (%s; recorded at %d)\n", rd.Seq, rd.Subject, rd.EventID, fieldsOrAll(rd.Fields), rd.Reason, rd.MarkerSeq)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(e.out, "  seq %d %s %s: %s\n", p.Seq, p.Subject, p.Kind, p.Detail)
	}
	if r.ProblemCount > len(r.Problems) {
		fmt.Fprintf(e.out, "  ... and %d more\n", r.ProblemCount-len(r.Problems))
	}
}

// verifyFailure is the error of a failed verification: the count, the
// first sequence, and the first problem's kind and detail.
func verifyFailure(r *audit.Report) error {
	msg := fmt.Sprintf("verification failed: %d problem(s)", r.ProblemCount)
	if r.FirstBadSeq != 0 {
		msg += fmt.Sprintf(", the first at stream sequence %d", r.FirstBadSeq)
	}
	if len(r.Problems) > 0 {
		p := r.Problems[0]
		msg += fmt.Sprintf(" (%s: %s)", p.Kind, p.Detail)
	}
	return errors.New(msg)
}

func fieldsOrAll(fs []string) string {
	if len(fs) == 0 {
		return "all content"
	}
	return strings.Join(fs, ", ")
}

// readAnchor reads a --state-file: nil when it does not exist yet (the
// first run trusts what it finds).
func readAnchor(path string) (*audit.Anchor, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var a audit.Anchor
	if err := json.Unmarshal(b, &a); err != nil || a.MsgSeq == 0 || a.Hash == "" {
		return nil, fmt.Errorf("--state-file %s: not a checkpoint anchor {\"msg_seq\": N, \"hash\": \"...\"} (%v)", path, err)
	}
	return &a, nil
}

// writeAnchor replaces the --state-file with a (written to a temporary
// file, then renamed).
func writeAnchor(path string, a audit.Anchor) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
