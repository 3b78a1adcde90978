package main

import "github.com/spf13/cobra"

func newDemoCommand(g *globals) *cobra.Command {
	return &cobra.Command{Use: "demo", Short: "(in progress)", Hidden: true}
}
