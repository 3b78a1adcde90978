package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/bench/peer"
)

func newPeerCommand(g *globals) *cobra.Command {
	var (
		o   peer.Options
		out string
	)
	cmd := &cobra.Command{
		Use:   "peer",
		Short: "Reproduce Cilium's BenchmarkAllocDelay{20,50}: fixed per-call delay, 100 QPS limiter, N nodes",
		Long: `peer brings up --nodes nodes, --workers at a time, each needing
max(--min-allocate, --pre-allocate) addresses (our min_pool_size), with every
API call taking --delay and all calls sharing one --qps/--burst limiter, and
times until every node has what it needs (see peer.Options for how
Cilium's terms map to ours).`,
		Example: `  terway-bench peer --delay 20ms --workers 10 --nodes 50 --out bench/results`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			o.Command, o.Logger = g.command, log
			r, err := peer.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			return writeResult(g.stdout, out, r)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.Delay, "delay", 20*time.Millisecond, "latency of every API call")
	f.IntVar(&o.Workers, "workers", 10, "nodes brought up at once")
	f.IntVar(&o.Nodes, "nodes", 20, "nodes (Cilium's b.N)")
	f.Float64Var(&o.QPS, "qps", 100, "calls per second of the limiter shared by all nodes (and of each daemon's rate_limit)")
	f.IntVar(&o.Burst, "burst", 4, "burst of the shared limiter")
	f.IntVar(&o.MinAllocate, "min-allocate", 10, "Cilium's MinAllocate: addresses a node needs")
	f.IntVar(&o.PreAllocate, "pre-allocate", 1, "Cilium's PreAllocate: free addresses a node keeps")
	f.StringVar(&o.InstanceType, "instance-type", "ecs.g7.large", "ECS type of the nodes (Cilium: m4.large)")
	f.Int64Var(&o.Seed, "seed", 1, "seed of fakecloud")
	f.Float64Var(&o.TimeScale, "time-scale", 1, "real time per simulated time (Cilium's benchmark runs in real time)")
	f.StringVar(&o.Name, "name", "", "name of the result (default alloc-delay<ms>-workers<W>-nodes<N>)")
	outFlag(cmd, &out)
	return cmd
}
