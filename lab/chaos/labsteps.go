package chaos

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// components are what each process kind kills.
var components = map[Kind]string{
	KillTerwayd: ComponentTerwayd, RestartContainerd: ComponentContainerd,
	RestartKubelet: ComponentKubelet, RestartAPIServer: ComponentAPIServer,
}

// applyProcess fixes the nodes the step's kills hit.
func applyProcess(_ context.Context, r *run, st *stepRun) (string, error) {
	if st.Kind == RestartAPIServer {
		st.resolved = TargetControlPlane
		return "kills on the control plane", nil
	}
	nodes, err := r.targetNodes(st)
	if err != nil {
		return "", err
	}
	st.nodes, st.resolved = nodes, nodeNames(nodes)
	return "kills on " + st.resolved, nil
}

// killMoment kills the step's component on each of its nodes.
func killMoment(ctx context.Context, r *run, st *stepRun) (string, error) {
	comp, down := components[st.Kind], st.Params.Downtime.D()
	targets := []string{""}
	if st.Kind != RestartAPIServer {
		targets = targets[:0]
		for _, n := range st.nodes {
			targets = append(targets, n.Name)
		}
	}
	var killed []string
	for _, node := range targets {
		err := r.e.Lab.Kill(ctx, comp, node, down)
		if err != nil && ctx.Err() != nil {
			// Not running until the window ended: not a fault fired,
			// and not the lab's failure either.
			st.did = append(st.did, fmt.Sprintf("no %s ran%s to kill before the step's window ended (+%s)", comp, onNode(node), r.since().D()))
			continue
		}
		if err != nil {
			return fmt.Sprintf("killed %d of %d", len(killed), len(targets)), fmt.Errorf("kill %s on %q: %w", comp, node, err)
		}
		killed = append(killed, node)
		st.done++
		st.did = append(st.did, fmt.Sprintf("killed %s%s at +%s", comp, onNode(node), r.since().D()))
	}
	return fmt.Sprintf("killed %s on %d node(s)", comp, len(killed)), nil
}

func onNode(node string) string {
	if node == "" {
		return ""
	}
	return " on " + node
}

// onTargetNode does act to the step's one target node and records it.
func onTargetNode(ctx context.Context, r *run, st *stepRun, did string, act func(context.Context, string) error) (string, error) {
	nodes, err := r.targetNodes(st)
	if err != nil {
		return "", err
	}
	n := nodes[0].Name
	st.resolved = n
	if err := act(ctx, n); err != nil {
		return "", fmt.Errorf("%s: %w", n, err)
	}
	st.done++
	st.did = append(st.did, fmt.Sprintf("%s %s at +%s", did, n, r.since().D()))
	return did + " " + n, nil
}

// stopNode powers the target node off.
func stopNode(ctx context.Context, r *run, st *stepRun) (string, error) {
	return onTargetNode(ctx, r, st, "stopped", func(ctx context.Context, n string) error {
		err := r.e.Lab.StopNode(ctx, n)
		if err == nil {
			st.stopped = n
		}
		return err
	})
}

// startNode powers the node stopNode stopped on again.
func startNode(ctx context.Context, r *run, st *stepRun) (string, error) {
	if st.stopped == "" {
		return "nothing to start", nil
	}
	if err := r.e.Lab.StartNode(ctx, st.stopped); err != nil {
		return "", fmt.Errorf("start %s: %w", st.stopped, err)
	}
	st.did = append(st.did, fmt.Sprintf("started %s at +%s", st.stopped, r.since().D()))
	n := st.stopped
	st.stopped = ""
	return "started " + n, nil
}

// releaseNode releases the target node's instance; later steps choose
// among the nodes left.
func releaseNode(ctx context.Context, r *run, st *stepRun) (string, error) {
	return onTargetNode(ctx, r, st, "released", func(ctx context.Context, n string) error {
		err := r.e.Lab.ReleaseNode(ctx, n)
		if err == nil {
			r.released[n] = true
		}
		return err
	})
}

// applyOutOfBand does what an operator would: detaches or deletes ENIs,
// or unassigns addresses, chosen among the secondary ENIs in use on the
// target's nodes. With none there, it does nothing, and the proof says
// so.
func applyOutOfBand(ctx context.Context, r *run, st *stepRun) (string, error) {
	w, err := r.e.Cloud.World(ctx)
	if err != nil {
		return "", fmt.Errorf("read the world: %w", err)
	}
	enis, err := r.candidateENIs(w, st)
	if err != nil {
		return "", err
	}
	if st.Kind == IPUnassignOOB {
		return unassignAddresses(ctx, r, st, enis)
	}
	if len(enis) == 0 {
		st.did = append(st.did, "no secondary ENI in use on "+st.resolved+" when the step started")
		return st.did[0], nil
	}
	for _, i := range pickN(st, len(enis)) {
		e := enis[i]
		if st.Kind == ENIDetachOOB {
			err = r.e.Operator.DetachENI(ctx, e.ID, e.InstanceID)
		} else {
			err = r.e.Operator.DeleteENI(ctx, e.ID)
		}
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", st.Kind, e.ID, err)
		}
		st.done++
		st.did = append(st.did, fmt.Sprintf("%s %s of %s at +%s", verb(st.Kind), e.ID, e.InstanceID, r.since().D()))
	}
	return fmt.Sprintf("%s %d ENI(s) on %s", verb(st.Kind), st.done, st.resolved), nil
}

func verb(k Kind) string {
	return map[Kind]string{ENIDetachOOB: "detached", ENIDeleteOOB: "deleted", IPUnassignOOB: "unassigned"}[k]
}

// candidateENIs are the secondary ENIs in use that the step's target
// means, by ID.
func (r *run) candidateENIs(w *admin.WorldView, st *stepRun) ([]admin.ENIView, error) {
	t := st.target()
	var nodes []Node
	if t.scope == TargetRandomENI {
		nodes, st.resolved = r.liveNodes(), "any node"
	} else if t.scope != TargetENI {
		var err error
		if nodes, err = r.targetNodes(st); err != nil {
			return nil, err
		}
		st.resolved = nodeNames(nodes)
	}
	var out []admin.ENIView
	for _, e := range w.ENIs {
		if t.scope == TargetENI {
			if e.ID == t.name {
				st.resolved = e.ID
				out = append(out, e)
			}
			continue
		}
		onTarget := slices.ContainsFunc(nodes, func(n Node) bool { return n.InstanceID == e.InstanceID })
		if onTarget && e.Type == admin.ENITypeSecondary && e.Status == admin.ENIInUse {
			out = append(out, e)
		}
	}
	if t.scope == TargetENI && len(out) == 0 {
		return nil, fmt.Errorf("no ENI %s in the world", t.name)
	}
	slices.SortFunc(out, func(a, b admin.ENIView) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// pickN chooses up to the step's count of n candidates, by its pick.
func pickN(st *stepRun, n int) []int {
	return st.rng().Perm(n)[:min(st.Params.Count, n)]
}

// unassignAddresses unassigns the step's count of secondary addresses
// of enis, one call per ENI.
func unassignAddresses(ctx context.Context, r *run, st *stepRun, enis []admin.ENIView) (string, error) {
	type addr struct {
		eni string
		ip  netip.Addr
	}
	var all []addr
	for _, e := range enis {
		for _, ip := range e.IPv4 {
			all = append(all, addr{e.ID, ip})
		}
	}
	if len(all) == 0 {
		st.did = append(st.did, "no secondary address on "+st.resolved+" when the step started")
		return st.did[0], nil
	}
	byENI := map[string][]netip.Addr{}
	for _, i := range pickN(st, len(all)) {
		byENI[all[i].eni] = append(byENI[all[i].eni], all[i].ip)
	}
	for _, e := range enis {
		ips := byENI[e.ID]
		if len(ips) == 0 {
			continue
		}
		slices.SortFunc(ips, netip.Addr.Compare)
		if err := r.e.Operator.UnassignIPs(ctx, e.ID, ips); err != nil {
			return "", fmt.Errorf("unassign %v from %s: %w", ips, e.ID, err)
		}
		st.done += int64(len(ips))
		st.did = append(st.did, fmt.Sprintf("unassigned %v from %s at +%s", ips, e.ID, r.since().D()))
	}
	return fmt.Sprintf("unassigned %d address(es) on %s", st.done, st.resolved), nil
}
