package runner

import (
	"context"
	"fmt"

	"github.com/terway-sim/terway/lab/workload"
)

// eipConfigName names the dynamic config that turns EIPs on for a run.
const eipConfigName = "chaos-eip"

// enableEIPs turns enable_eip_pool on on every node for a plan whose pods
// get EIPs (dynamic config, terway restarted), with a 30s gc_period so
// that an EIP a killed AllocIP left unrecorded is swept within the
// audit's limit, and returns how to turn it off again: after the run,
// once the workload's deletion has given its EIPs back (the deferred
// deletion in Run comes first).
func enableEIPs(ctx context.Context, c *Config) (undo func(), err error) {
	var set []string
	undo = func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		for _, n := range set {
			if err := workload.ClearNodeConfig(dctx, c.Kube, n, eipConfigName); err != nil {
				c.progress("node %s: removing the EIP config: %v", n, err)
				continue
			}
			if err := workload.RestartTerway(dctx, c.Kube, n); err != nil {
				c.progress("node %s: restarting terway without EIPs: %v", n, err)
			}
		}
	}
	for _, n := range c.Engine.Nodes {
		if err := workload.SetNodeConfig(ctx, c.Kube, n.Name, eipConfigName, map[string]any{"enable_eip_pool": "true", "gc_period": "30s"}); err != nil {
			return undo, fmt.Errorf("chaos runner: turn EIPs on on %s: %w", n.Name, err)
		}
		set = append(set, n.Name)
		if err := workload.RestartTerway(ctx, c.Kube, n.Name); err != nil {
			return undo, fmt.Errorf("chaos runner: restart terway on %s with EIPs: %w", n.Name, err)
		}
	}
	c.progress("EIPs on on %d node(s)", len(set))
	return undo, nil
}
