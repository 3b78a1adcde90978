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
	// counted says after, or for a fault step its faults' counters, was
	// read.
	before, after []admin.CallStat
	counted       bool
	// settings are fakecloud's settings when the step started; restore
	// is the update that undoes the step's change.
	settings admin.Settings
	restore  map[string]any
	// drained are the vSwitches drained; stopped the node stopped.
	drained []string
	stopped string
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

// removeFaults reads how many calls the step's faults hit, then removes
// them.
func removeFaults(ctx context.Context, r *run, st *stepRun) (string, error) {
	ferr := readFired(ctx, r, st)
	detail, err := undoEach(st, &st.installed, "remove fault", func(name string) error { return r.e.Cloud.RemoveFault(ctx, name) })
	return detail, errors.Join(ferr, err)
}

// undoEach undoes each of *items, leaving there those it failed on.
func undoEach(st *stepRun, items *[]string, what string, undo func(string) error) (string, error) {
	var errs []error
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

// readFired sums how many calls the step's faults hit while installed,
// as fakecloud counts them: latency, pause and stale ones included,
// whose calls succeed or never end, and metadata reads.
func readFired(ctx context.Context, r *run, st *stepRun) error {
	faults, err := r.e.Cloud.Faults(ctx)
	if err != nil {
		return fmt.Errorf("read the faults' counters: %w", err)
	}
	st.fired = 0
	for _, f := range faults {
		if slices.Contains(st.installed, f.Name) {
			st.fired += f.Fired
		}
	}
	st.counted = true
	return nil
}

// proveFaults proves a fault step by the calls its faults hit.
func proveFaults(_ *run, st *stepRun) (int64, string) {
	if !st.counted {
		return 0, "the faults' counters were not read before their removal, so no proof"
	}
	what := "calls"
	if st.Service() == admin.ServiceMetadata {
		what = "metadata reads"
	}
	return st.fired, fmt.Sprintf("%d %s hit by faults %s", st.fired, what, strings.Join(faultNames(st.Faults), ", "))
}

func faultNames(fs []admin.Fault) []string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return names
}

// Service is the service the step's faults act on.
func (s ScheduledStep) Service() string {
	if len(s.Faults) == 0 {
		return ""
	}
	return s.Faults[0].Service
}
