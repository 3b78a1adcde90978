package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/bench/fleet"
	"github.com/terway-sim/terway/bench/profile"
)

func newFleetCommand(g *globals) *cobra.Command {
	var (
		o        fleet.Options
		prof     string
		sets     []string
		throttle []string
		out      string
	)
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Simulate a fleet: many daemons in this process against one fakecloud with account-wide budgets",
		Example: `  terway-bench fleet --nodes 1000 --pods-per-node 30 --time-scale 1 --seed 1 --out bench/results
  terway-bench fleet --nodes 100 --pods-per-node 30 --throttle CreateNetworkInterface=300 --out /tmp/r`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := profile.ByName(prof)
			if err != nil {
				return err
			}
			if o.Daemon, err = parseSets(sets); err != nil {
				return err
			}
			if o.Throttle, err = parseBudgets(throttle); err != nil {
				return err
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			o.Profile, o.Command, o.Logger, o.DaemonLogger = p, g.command, log, log
			r, runErr := fleet.Run(cmd.Context(), o)
			if r == nil {
				return runErr
			}
			if err := writeResult(g.stdout, out, r); err != nil {
				return errors.Join(runErr, err)
			}
			if errors.Is(runErr, fleet.ErrPodsFailed) {
				return fmt.Errorf("%s: %w", r.Name, runErr)
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Nodes, "nodes", 100, "nodes (daemons) in the fleet")
	f.IntVar(&o.PodsPerNode, "pods-per-node", 30, "pods each node starts")
	f.Int64Var(&o.Seed, "seed", 1, "seed of fakecloud and of the fleet's jitter")
	f.Float64Var(&o.TimeScale, "time-scale", 1, "real time per simulated time, in (0, 1]; below about 0.5 a 1,000-node fleet outruns this machine and the figures stop being invariant")
	f.StringVar(&prof, "profile", "default", "cloud latency profile: "+profileNames())
	f.DurationVar(&o.StartJitter, "start-jitter", 10*time.Second, "daemons start spread over this span")
	f.StringVar(&o.InstanceType, "instance-type", "", "ECS type of every node (default: the smallest that fits)")
	f.StringArrayVar(&sets, "set", nil, "eni_conf KEY=VALUE for every daemon, simulated time (repeatable)")
	f.StringArrayVar(&throttle, "throttle", nil, "account-wide budget ACTION=CALLS per window (repeatable; \"*\" for the rest)")
	f.DurationVar(&o.ThrottleWindow, "throttle-window", 0, "length of a throttle window (default 60s)")
	f.DurationVar(&o.Timeout, "timeout", 0, "simulated time after which pods without an address count as failed (default 1h)")
	f.BoolVar(&o.Restart, "restart", false, "once every pod has an address, restart every daemon at once and measure that (scenario fleet-restart)")
	f.StringVar(&o.Name, "name", "", "name of the result (default fleet-<nodes>x<pods>, fleet-restart-<nodes>x<pods> with --restart)")
	outFlag(cmd, &out)
	return cmd
}
