package main

import "github.com/spf13/cobra"

func addImportCmds(root *cobra.Command, lf *logFlags) {}
