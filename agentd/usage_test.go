package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// allCommands lists every command of the tree under c, c first.
func allCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, s := range c.Commands() {
		out = append(out, allCommands(s)...)
	}
	return out
}

// argWords are the argument words of a command's Use line ("get THREAD"
// has THREAD; "list [TENANT]" has the optional [TENANT]).
func argWords(c *cobra.Command) (required, optional int) {
	for _, w := range strings.Fields(c.Use)[1:] {
		if strings.HasPrefix(w, "[") {
			optional++
		} else {
			required++
		}
	}
	return required, optional
}

// Every command's --help shows an example, and every example names that
// command (or one of its subcommands) with flags it has.
func TestEveryCommandsHelpHasAnExampleThatParses(t *testing.T) {
	for _, c := range allCommands(newRootCmd())[1:] {
		t.Run(c.CommandPath(), func(t *testing.T) {
			require.NotEmpty(t, strings.TrimSpace(c.Example), "%s --help has no example", c.CommandPath())
			for line := range strings.SplitSeq(c.Example, "\n") {
				line, _, _ = strings.Cut(line, "#")
				line, _, _ = strings.Cut(line, ">")
				line, _, _ = strings.Cut(line, "|")
				words := strings.Fields(line)
				if len(words) == 0 {
					continue
				}
				require.True(t, strings.HasPrefix(line, "  agentd "), "example lines are indented commands: %q", line)
				root := newRootCmd()
				found, rest, err := root.Find(words[1:])
				require.NoError(t, err, line)
				require.True(t, found.CommandPath() == c.CommandPath() || strings.HasPrefix(found.CommandPath(), c.CommandPath()+" "),
					"the example %q runs %s, not %s", line, found.CommandPath(), c.CommandPath())
				require.NoError(t, found.ParseFlags(rest), "the example %q", line)
			}
		})
	}
}

// Bad usage exits 2 with one wording: "agentd: usage: ..." and where the
// help is, whatever the command and whatever is wrong.
func TestBadUsageExitsTwoWithOneWording(t *testing.T) {
	type usageCase struct {
		name string
		args []string
	}
	cases := []usageCase{
		{"an unknown command", []string{"frobnicate"}},
		{"an unknown subcommand", []string{"thread", "frobnicate"}},
		{"import without files", []string{"import"}},
		{"thread get without a thread", []string{"thread", "get"}},
		{"tenant list with two tenants", []string{"tenant", "list", "a", "b"}},
		{"a bad --replies", []string{"import", "--replies", "maybe", "missing.jsonl"}},
		{"a bad --log-level", []string{"thread", "list", "--log-level", "loud"}},
	}
	for _, c := range allCommands(newRootCmd())[1:] {
		if !c.Runnable() {
			continue
		}
		args := strings.Fields(strings.TrimPrefix(c.CommandPath(), "agentd "))
		cases = append(cases, usageCase{c.CommandPath() + " with an unknown flag", append(args, "--no-such-flag")})
		switch required, optional := argWords(c); {
		case required > 0:
			cases = append(cases, usageCase{c.CommandPath() + " without its arguments", args})
		case optional == 0 && !strings.HasSuffix(c.Use, "..."):
			cases = append(cases, usageCase{c.CommandPath() + " with an argument it does not take", append(args, "extra")})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := runCLIFull(t, tc.args...)
			require.Equal(t, 2, exitStatus(t, err), "agentd %s\nstdout: %s\nstderr: %s", strings.Join(tc.args, " "), stdout, stderr)
			require.Empty(t, stdout)
			require.True(t, strings.HasPrefix(stderr, "agentd: usage: "), "stderr: %s", stderr)
			require.Regexp(t, `\nRun 'agentd( [a-z-]+)* --help' for usage\.\n$`, stderr)
		})
	}
}
