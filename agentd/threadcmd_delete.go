package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// The subcommands of 'agentd thread' that remove a thread or its content:
// delete and undelete (reversible), erase and redact (irreversible).

func newThreadDeleteCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{Use: "delete THREAD", Short: "Soft-delete a thread (hidden, kept for audit, reversible with undelete)", Args: exactArgs(1),
		Example: `  agentd thread delete hello --reason "user request"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				v, err := e.c.Delete(ctx, e.tenant, args[0], reason)
				if err == nil {
					fmt.Fprintf(e.out, "deleted %s at version %d\n", args[0], v)
				}
				return err
			})
		}}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the event)")
	return cmd
}

func newThreadUndeleteCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{Use: "undelete THREAD", Short: "Reverse a soft delete", Args: exactArgs(1),
		Example: `  agentd thread undelete hello --reason "deleted by mistake"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				v, err := e.c.Undelete(ctx, e.tenant, args[0], reason)
				if err == nil {
					fmt.Fprintf(e.out, "undeleted %s at version %d\n", args[0], v)
				}
				return err
			})
		}}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the event)")
	return cmd
}

func newThreadEraseCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var reason string
	var yes bool
	cmd := &cobra.Command{Use: "erase THREAD", Short: "Irreversibly purge a thread's events, snapshot and index entry", Args: exactArgs(1),
		Example: `  agentd thread erase hello --reason "GDPR request 1234" --yes`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return usageError{fmt.Errorf("erase is irreversible: pass --yes")}
			}
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				return eraseThread(ctx, e, args[0], reason)
			})
		}}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm the irreversible erasure")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the erasure marker)")
	return cmd
}

// eraseThread erases thread and prints what was removed.
func eraseThread(ctx context.Context, e *cliEnv, thread, reason string) error {
	rep, err := e.c.Erase(ctx, e.tenant, thread, reason)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(rep)
	}
	fmt.Fprintf(e.out, "erased %s/%s: %d events (up to seq %d), snapshot keys %v, index keys %v, key destroyed %v\n",
		rep.Tenant, rep.Thread, rep.RemovedEvents, rep.LastSeq, rep.SnapshotKeys, rep.IndexKeys, rep.KeyDestroyed)
	return nil
}

func newThreadRedactCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var reason string
	var yes bool
	var seq uint64
	var fields []string
	cmd := &cobra.Command{Use: "redact THREAD", Short: "Irreversibly make one event's content (or some fields) unreadable, keeping the event", Args: exactArgs(1),
		Example: `  agentd thread redact hello --seq 42 --reason "pasted a password" --yes
  agentd thread redact hello --seq 42 --fields tool_calls.arguments --yes`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return usageError{fmt.Errorf("redaction is irreversible: pass --yes")}
			}
			if seq == 0 {
				return usageError{fmt.Errorf("--seq is required: the stream sequence of the event to redact")}
			}
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				return redactEvent(ctx, e, args[0], seq, fields, reason)
			})
		}}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm the irreversible redaction")
	cmd.Flags().Uint64Var(&seq, "seq", 0, "stream sequence of the event to redact")
	cmd.Flags().StringSliceVar(&fields, "fields", nil, "payload fields to redact (content, reasoning, tool_calls.arguments, metadata, value, title, system_prompt); default: every content field of the event")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the clear in the event.redacted event)")
	return cmd
}

// redactEvent redacts fields (all content fields when empty) of the event
// at seq of thread and prints what was redacted.
func redactEvent(ctx context.Context, e *cliEnv, thread string, seq uint64, fields []string, reason string) error {
	rep, err := e.c.Redact(ctx, e.tenant, thread, seq, fields, reason)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(rep)
	}
	fmt.Fprintf(e.out, "redacted %s/%s seq %d (%s %s): fields %v; recorded at seq %d\n",
		rep.Tenant, rep.Thread, rep.Seq, rep.Type, rep.EventID, rep.Fields, rep.Version)
	return nil
}
