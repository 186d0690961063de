package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/events"
)

// auditVerifyFlags are the flags of 'agentd audit verify' beside the
// connection's.
type auditVerifyFlags struct {
	thread, pubKey, anchorHash, stateFile string
	anchorSeq                             uint64
	interval, maxLag                      time.Duration
}

func newAuditVerifyCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var v auditVerifyFlags
	cmd := &cobra.Command{Use: "verify", Short: "Re-read the log and the checkpoints; exit 1 when anything differs", Args: cobra.NoArgs,
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
			return runAuditVerify(cmd, f, lf, &v)
		}}
	cmd.Flags().StringVar(&v.thread, "thread", "", "verify one thread of --tenant (any id; external ids are mapped)")
	cmd.Flags().StringVar(&v.pubKey, "public-key", "", "trusted public key: base64, PEM, or a file of either (default: the data directory's audit key)")
	cmd.Flags().StringVar(&v.stateFile, "state-file", "", "keep the last verified checkpoint in this file: each run must find it in the stream as it was (a rewritten log fails) and, when clean, records the new one (as immudb clients keep their last verified state)")
	cmd.Flags().Uint64Var(&v.anchorSeq, "anchor-seq", 0, "a checkpoint trusted earlier: its message's stream sequence (a report's last_checkpoint.msg_seq)")
	cmd.Flags().StringVar(&v.anchorHash, "anchor-hash", "", "that checkpoint's body hash (last_checkpoint.hash)")
	cmd.Flags().DurationVar(&v.interval, "checkpoint-interval", audit.DefaultInterval, "the checkpoint cadence assumed when the stream holds no signed checkpoint recording its own (each checkpoint records its checkpointer's)")
	cmd.Flags().DurationVar(&v.maxLag, "max-lag", audit.DefaultMaxLag, "the grace beyond the cadence: events no checkpoint covers fail the verification (uncovered) once they and the newest checkpoint are older than the cadence plus this")
	return cmd
}

// runAuditVerify verifies the scope v names, prints the report, and keeps
// the last checkpoint in v's state file when the verification is clean. A
// failed verification is an error.
func runAuditVerify(cmd *cobra.Command, f *cliFlags, lf *logFlags, v *auditVerifyFlags) error {
	pub, err := trustedKey(v.pubKey, &f.conn)
	if err != nil {
		return err
	}
	scope, err := v.scope(f.Tenant, cmd.Flags().Changed("tenant"))
	if err != nil {
		return err
	}
	opts, err := v.options(pub, &f.conn)
	if err != nil {
		return err
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
	if v.stateFile != "" && rep.LastCheckpoint != nil {
		return audit.SaveAnchor(v.stateFile, rep.LastCheckpoint.Anchor)
	}
	return nil
}

// scope is what to verify: the whole stream, tenant (when --tenant was
// given or --thread is), or one thread of tenant.
func (v *auditVerifyFlags) scope(tenant string, tenantGiven bool) (audit.Scope, error) {
	scope := audit.Scope{}
	if tenantGiven || v.thread != "" {
		scope.Tenant = tenant
		if err := events.ValidateTenant(scope.Tenant); err != nil {
			return scope, usageError{err}
		}
	}
	if v.thread != "" {
		id, _, err := events.ThreadIDFor(v.thread)
		if err != nil {
			return scope, usageError{err}
		}
		scope.Thread = id
	}
	return scope, nil
}

// options are the verification's options: trusted key pub, the stream c
// names, the cadence and the anchor (--anchor-seq/--anchor-hash or the
// state file's).
func (v *auditVerifyFlags) options(pub ed25519.PublicKey, c *connFlags) (audit.VerifyOptions, error) {
	if v.interval <= 0 || v.maxLag <= 0 {
		return audit.VerifyOptions{}, usageError{errors.New("--checkpoint-interval and --max-lag must be positive durations")}
	}
	opts := audit.VerifyOptions{Trusted: []ed25519.PublicKey{pub}, Stream: c.Stream, SubjectPrefix: c.Prefix,
		Interval: v.interval, MaxLag: v.maxLag}
	if (v.anchorSeq == 0) != (v.anchorHash == "") {
		return opts, usageError{errors.New("--anchor-seq and --anchor-hash go together")}
	}
	if v.anchorSeq != 0 {
		opts.Anchor = &audit.Anchor{MsgSeq: v.anchorSeq, Hash: v.anchorHash}
	}
	if v.stateFile != "" {
		if opts.Anchor != nil {
			return opts, usageError{errors.New("--state-file keeps its own anchor: give it or --anchor-seq/--anchor-hash, not both")}
		}
		a, err := audit.LoadAnchor(v.stateFile)
		if err != nil {
			return opts, fmt.Errorf("--state-file: %w", err)
		}
		opts.Anchor = a
	}
	return opts, nil
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
