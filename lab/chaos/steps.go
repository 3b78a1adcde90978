package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// stepRun is a step in a run: what it resolved to, what it changed (so
// that undo reverts exactly that) and what proves it fired.
type stepRun struct {
	ScheduledStep
	applied, undone bool
	from, to        admin.Duration
	// resolved says what the target meant; nodes are the nodes it hit.
	resolved string
	nodes    []Node
	// caller is the cloud faults' Caller; installed the faults in place.
	caller    string
	installed []string
	// before and after are fakecloud's call counters around the step;
	// counted says after was read.
	before, after []admin.CallStat
	counted       bool
	// settings are fakecloud's settings when the step started; restore
	// is the update that undoes the step's change.
	settings admin.Settings
	restore  map[string]any
	// drained are the vSwitches drained; stopped the node stopped.
	drained []string
	stopped string
	// held is the most calls a hanging fault was seen to hold.
	held int
	// done counts kills, nodes, ENIs or addresses acted on; did says
	// what, or why nothing.
	done int64
	did  []string
	// fired and evidence are the proof; errs the step's failures.
	fired    int64
	evidence string
	errs     []string
}

// rng makes the step's choices among what the lab has when it starts.
func (st *stepRun) rng() *rand.Rand { return rand.New(rand.NewPCG(st.Pick, uint64(st.Index))) }

// handler applies, undoes and proves one kind; a nil undo means the
// kind leaves nothing to undo.
type handler struct {
	apply func(context.Context, *run, *stepRun) (string, error)
	undo  func(context.Context, *run, *stepRun) (string, error)
	proof func(*run, *stepRun) (int64, string)
}

// The kinds that share a handler.
var (
	faultHandler   = handler{apply: applyFaults, undo: removeFaults, proof: proveFaults}
	processHandler = handler{apply: applyProcess, proof: proveDone}
	oobHandler     = handler{apply: applyOutOfBand, proof: proveDone}
)

var handlers = map[Kind]handler{
	CloudErrors: faultHandler, LostAnswers: faultHandler, Consistency: faultHandler,
	MetadataOutage: faultHandler, MetadataStale: faultHandler,
	SlowAsync:         {apply: applySlowAsync, undo: restoreSettings, proof: proveCalls},
	ThrottleStorm:     {apply: applyThrottle, undo: restoreSettings, proof: proveCalls},
	VSwitchExhaustion: {apply: drainVSwitches, undo: refillVSwitches, proof: proveCalls},
	KillTerwayd:       processHandler, RestartContainerd: processHandler,
	RestartKubelet: processHandler, RestartAPIServer: processHandler,
	NodeStopStart: {apply: stopNode, undo: startNode, proof: proveDone},
	NodeRelease:   {apply: releaseNode, proof: proveDone},
	ENIDetachOOB:  oobHandler, ENIDeleteOOB: oobHandler, IPUnassignOOB: oobHandler,
}

// liveNodes are the lab's nodes not released by this run, by name.
func (r *run) liveNodes() []Node {
	var out []Node
	for _, n := range r.e.Nodes {
		if !r.released[n.Name] {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// targetNodes resolves a node target: every live node, one chosen by the
// step's pick, or the named one.
func (r *run) targetNodes(st *stepRun) ([]Node, error) {
	live := r.liveNodes()
	t := st.target()
	switch t.scope {
	case TargetAll:
		return live, nil
	case TargetNode:
		i := slices.IndexFunc(live, func(n Node) bool { return n.Name == t.name })
		if i < 0 {
			return nil, fmt.Errorf("node %s is not in the lab (any more)", t.name)
		}
		return live[i : i+1], nil
	}
	if len(live) == 0 {
		return nil, errors.New("no node left to choose from")
	}
	return []Node{live[st.rng().IntN(len(live))]}, nil
}

func nodeNames(nodes []Node) string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return strings.Join(names, ",")
}

// applyFaults installs the step's faults, for the callers its target
// means: everyone, or one node's instance.
func applyFaults(ctx context.Context, r *run, st *stepRun) (string, error) {
	st.resolved = "all callers"
	if st.target().scope != TargetAll {
		nodes, err := r.targetNodes(st)
		if err != nil {
			return "", err
		}
		st.nodes, st.caller, st.resolved = nodes, nodes[0].InstanceID, nodes[0].Name
	}
	var err error
	if st.before, err = r.e.Cloud.Calls(ctx); err != nil {
		return "", fmt.Errorf("read call counters: %w", err)
	}
	for _, f := range st.Faults {
		f.Caller = st.caller
		name, err := r.e.Cloud.AddFault(ctx, f)
		if err != nil {
			return strings.Join(st.installed, ", "), fmt.Errorf("add fault %s: %w", f.Name, err)
		}
		st.installed = append(st.installed, name)
	}
	return fmt.Sprintf("faults %s for %s", strings.Join(st.installed, ", "), st.resolved), nil
}

// removeFaults removes what applyFaults installed.
func removeFaults(ctx context.Context, r *run, st *stepRun) (string, error) {
	return undoEach(ctx, r, st, &st.installed, "remove fault", func(name string) error { return r.e.Cloud.RemoveFault(ctx, name) })
}

// undoEach reads the call counters the proof compares, then undoes each
// of *items, leaving there those it failed on.
func undoEach(ctx context.Context, r *run, st *stepRun, items *[]string, what string, undo func(string) error) (string, error) {
	errs := []error{readCallsAfter(ctx, r, st)}
	var left, done []string
	for _, it := range *items {
		if err := undo(it); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", what, it, err))
			left = append(left, it)
		} else {
			done = append(done, it)
		}
	}
	*items = left
	return fmt.Sprintf("%s %s", what, strings.Join(done, ", ")), errors.Join(errs...)
}

// readCallsAfter reads the call counters as a step ends, before it is
// undone.
func readCallsAfter(ctx context.Context, r *run, st *stepRun) error {
	calls, err := r.e.Cloud.Calls(ctx)
	if err != nil {
		return fmt.Errorf("read call counters: %w", err)
	}
	st.after, st.counted = calls, true
	return nil
}

// sampleHeld counts the calls hanging faults hold now; a failed read is
// skipped (the next sample or the undo's reads again).
func (r *run) sampleHeld(ctx context.Context) {
	var hanging []*stepRun
	for _, st := range r.steps {
		if st.applied && !st.undone && slices.ContainsFunc(st.Faults, func(f admin.Fault) bool { return f.Kind == admin.FaultPause }) {
			hanging = append(hanging, st)
		}
	}
	if len(hanging) == 0 {
		return
	}
	faults, err := r.e.Cloud.Faults(ctx)
	if err != nil {
		return
	}
	for _, f := range faults {
		for _, st := range hanging {
			if slices.Contains(st.installed, f.Name) {
				st.held = max(st.held, f.Held)
			}
		}
	}
}

// proveFaults proves a fault step by the calls answered with its
// outcome while it was in place, or by the calls it held.
func proveFaults(r *run, st *stepRun) (int64, string) {
	p := st.Params
	switch {
	case st.Kind == MetadataOutage && p.Mode == "hang":
		return int64(st.held), fmt.Sprintf("at most %d metadata requests held at once", st.held)
	case st.Service() == admin.ServiceMetadata:
		return 0, "fakecloud does not account metadata answers yet, so nothing proves this fault fired"
	}
	return proveCalls(r, st)
}

// Service is the service the step's faults act on.
func (s ScheduledStep) Service() string {
	if len(s.Faults) == 0 {
		return ""
	}
	return s.Faults[0].Service
}
