package runner

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/chaos/report"
)

// coldPools empties the daemons' pools before the rollout: an operator
// deletes every secondary ENI attached to a lab node that holds no pod's
// address, then the run waits until the audit is clean, that is until
// each daemon has seen its idle ENIs gone (its heal, or its pool sync) and the lab is
// consistent again. Only then do the plan's faults start, on nodes that
// have to create, attach and fill ENIs for the rollout. It returns a note
// for the report.
func coldPools(ctx context.Context, cfg *Config, s *chaos.Schedule) (string, error) {
	idle, err := idleENIs(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("chaos runner: cold pools: %w", err)
	}
	for _, e := range idle {
		if err := cfg.Engine.Operator.DeleteENI(ctx, e.ID); err != nil {
			return "", fmt.Errorf("chaos runner: cold pools: %w", err)
		}
	}
	ids := make([]string, len(idle))
	for i, e := range idle {
		ids[i] = e.ID + " (" + e.InstanceID + ")"
	}
	note := fmt.Sprintf("cold pools: an operator deleted %d idle secondary ENI(s) before the rollout", len(idle))
	if len(idle) > 0 {
		note += ": " + strings.Join(ids, ", ")
	}
	cfg.progress("%s", note)
	if len(idle) == 0 {
		return note, nil
	}
	within := cmp.Or(cfg.ColdTimeout, max(s.Plan.Invariants.AuditClean.D(), DefaultColdTimeout))
	rep, err := cfg.Audit(ctx, within)
	if err != nil {
		return "", fmt.Errorf("chaos runner: cold pools: audit: %w", err)
	}
	if !rep.Clean() {
		return "", fmt.Errorf("chaos runner: cold pools: the audit was not clean within %s after the idle ENIs were deleted: %s",
			within, report.AuditSummary(rep))
	}
	cfg.progress("cold pools: the audit is clean again")
	return note, nil
}

// idleENIs are the secondary ENIs attached to the lab's nodes that hold
// no address of a pod, by ID.
func idleENIs(ctx context.Context, cfg *Config) ([]admin.ENIView, error) {
	world, err := cfg.Engine.Cloud.World(ctx)
	if err != nil {
		return nil, fmt.Errorf("read fakecloud's world: %w", err)
	}
	pods, err := cfg.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	used := map[netip.Addr]bool{}
	for _, p := range report.PodAddresses(pods.Items) {
		for _, ip := range p.IPs {
			used[ip] = true
		}
	}
	var out []admin.ENIView
	for _, e := range world.ENIs {
		onNode := slices.ContainsFunc(cfg.Engine.Nodes, func(n chaos.Node) bool { return n.InstanceID == e.InstanceID })
		if !onNode || e.Type != admin.ENITypeSecondary || e.Status != admin.ENIInUse {
			continue
		}
		if !slices.ContainsFunc(e.IPv4, func(ip netip.Addr) bool { return used[ip] }) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b admin.ENIView) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
