package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/lab/cluster"
)

// newSuperviseCommand is the background process up starts: it owns the
// running lab until it gets SIGTERM (from down).
func newSuperviseCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "supervise",
		Short:  "Run a lab in the foreground until SIGTERM (started by up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cluster.ReadConfig(g.dir())
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			s, err := cluster.NewSupervisor(cfg, log)
			if err != nil {
				return err
			}
			return s.Run(cmd.Context())
		},
	}
}
