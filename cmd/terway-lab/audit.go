package main

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/cluster"
)

func newAuditCommand(g *globals) *cobra.Command {
	var asJSON bool
	var within time.Duration
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Look for leaks: compare fakecloud, the API server, each daemon's store and each node's datapath",
		Long: `audit computes leaks independently of the daemons' own view, from four
sources: fakecloud's world (ENIs, addresses, tags), the API server's pods,
each daemon's store, and each node namespace's links, addresses, rules,
routes, neighbours and tc. Every disagreement is reported; the exit status
is 1 if there is any. --within retries until clean or the time is up, as an
allocation in flight can look like a leak for a moment.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := cluster.ReadState(g.dir())
			if err != nil {
				return err
			}
			kube, err := kubeClient(st)
			if err != nil {
				return err
			}
			r, err := audit.RunUntilClean(cmd.Context(), st.AuditInput(kube), within)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				err = enc.Encode(r)
			} else {
				err = r.WriteText(g.stdout)
			}
			if err != nil {
				return err
			}
			if !r.Clean() {
				return errors.New("audit found leaks")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().DurationVar(&within, "within", 0, "retry until clean for up to this long")
	return cmd
}
