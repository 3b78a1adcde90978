package daemon

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/terway-sim/terway/fakecloud"
)

// The fault schedules of TestFaultSchedules (property_test.go). A schedule
// is a pure function of its seed: genSchedule(seed) always returns the same
// steps, so a failing seed replays with -seed. What the daemon does with
// the steps (which call a fault hits, where a kill lands) depends on timing
// and is not replayed exactly.

// Fault kinds of the matrix.
const (
	kindError    = "error"
	kindLost     = "lost answer"
	kindConfirm  = "failing confirmation"
	kindSlow     = "slow transition"
	kindThrottle = "throttling"
)

var matrixKinds = []string{kindError, kindLost, kindConfirm, kindSlow, kindThrottle}

// The actions the daemon calls in ENIMultiIP mode (IPv4): the mutating
// ones and the ones that confirm a mutation (status waits, restore,
// sweep). IPv6 actions are left out: the schedules run a single-stack
// node.
var (
	eniMutating = []string{"CreateNetworkInterface", "AttachNetworkInterface", "DetachNetworkInterface",
		"DeleteNetworkInterface", "AssignPrivateIpAddresses", "UnassignPrivateIpAddresses"}
	eniConfirming = []string{"DescribeNetworkInterfaceAttribute", "DescribeNetworkInterfaces"}
	eniActions    = append(append([]string{}, eniMutating...), eniConfirming...)
	// The EIP actions of the third of the pods that ask for an EIP. Their
	// disturbances come from a stream of their own (genSchedule), so that
	// the ENI disturbances of every seed stay what they were.
	eipMutating     = []string{"AllocateEipAddress", "AssociateEipAddress", "UnassociateEipAddress", "ReleaseEipAddress"}
	eipConfirming   = []string{"DescribeEipAddresses"}
	eipActions      = append(append([]string{}, eipMutating...), eipConfirming...)
	schedMutating   = append(append([]string{}, eniMutating...), eipMutating...)
	schedConfirming = append(append([]string{}, eniConfirming...), eipConfirming...)
	schedActions    = append(append([]string{}, eniActions...), eipActions...)
)

// cell is one fault kind × action pair of the matrix.
type cell struct{ kind, action string }

// inMatrix reports whether the pair is a cell of the matrix: errors and
// lost answers hit the mutating actions, failing confirmations the
// confirming ones, slow transitions the actions with an asynchronous
// effect, throttling every action.
func inMatrix(c cell) bool {
	switch c.kind {
	case kindError, kindLost:
		return contains(schedMutating, c.action)
	case kindSlow:
		return slowSettings[c.action] != ""
	case kindConfirm:
		return contains(schedConfirming, c.action)
	case kindThrottle:
		return contains(schedActions, c.action)
	}
	return false
}

// slowSettings names, per action, the fakecloud setting that makes its
// asynchronous effect slow. The consistency window hides a new ENI from
// Describe*; the metadata lag delays addresses (and ENIs) in metadata.
var slowSettings = map[string]string{
	"CreateNetworkInterface":     "consistencyWindow",
	"AttachNetworkInterface":     "attachDelay",
	"DetachNetworkInterface":     "detachDelay",
	"DeleteNetworkInterface":     "deleteDelay",
	"AssignPrivateIpAddresses":   "metadataLag",
	"UnassignPrivateIpAddresses": "metadataLag",
	"AssociateEipAddress":        "eipDelay",
	"UnassociateEipAddress":      "eipDelay",
}

// applySlow sets the setting of slowSettings[action] to d (world time).
func applySlow(s *fakecloud.Settings, action string, d time.Duration) {
	switch slowSettings[action] {
	case "consistencyWindow":
		s.ConsistencyWindow = fakecloud.Duration(d)
	case "attachDelay":
		s.AttachDelay = fakecloud.Duration(d)
	case "detachDelay":
		s.DetachDelay = fakecloud.Duration(d)
	case "deleteDelay":
		s.DeleteDelay = fakecloud.Duration(d)
	case "metadataLag":
		s.MetadataLag = fakecloud.Duration(d)
	case "eipDelay":
		s.EIPDelay = fakecloud.Duration(d)
	}
}

var throttleCodes = []string{"Throttling", "Throttling.User", "Throttling.Api"}

type stepKind string

const (
	stepBurst   stepKind = "burst"   // N concurrent AllocIPs of new pods
	stepRelease stepKind = "release" // N concurrent ReleaseIPs of running pods
	stepFault   stepKind = "fault"   // install Fault (Cell says which cell it aims at)
	stepSlow    stepKind = "slow"    // slow down Cell.action's transition by Delay (world time)
	stepBudget  stepKind = "budget"  // throttle budget Budget calls per window for Cell.action
	stepClear   stepKind = "clear"   // remove every fault, slow-down and budget
	stepKill    stepKind = "kill"    // after Delay, SIGKILL the daemon; lose the store (Loss); restart
	stepWait    stepKind = "wait"    // let Delay pass
)

// Store losses between a kill and the restart.
const (
	lossNone     = ""
	lossTruncate = "truncate" // the store file cut to 0 bytes
	lossDelete   = "delete"   // the store file removed
)

type step struct {
	Kind stepKind
	// N is how many pods a burst adds or a release removes (a release
	// takes at most the running pods; a burst at most the free capacity).
	N int
	// Async: the next step starts without waiting for the calls, so a
	// kill can land while they are in flight.
	Async  bool
	Cell   cell
	Fault  fakecloud.Fault
	Budget int
	Delay  time.Duration
	Loss   string
}

func (s step) String() string {
	switch s.Kind {
	case stepBurst, stepRelease:
		a := ""
		if s.Async {
			a = " async"
		}
		return fmt.Sprintf("%s %d%s", s.Kind, s.N, a)
	case stepFault:
		f := s.Fault
		how := fmt.Sprintf("count %d", f.Count)
		if f.Count == 0 {
			how = fmt.Sprintf("p %.2f", f.Probability)
		}
		return fmt.Sprintf("fault %s %s %s(%s) %s", s.Cell.kind, f.Action, f.Kind, f.Code, how)
	case stepSlow:
		return fmt.Sprintf("slow %s %s=%v", s.Cell.action, slowSettings[s.Cell.action], s.Delay)
	case stepBudget:
		return fmt.Sprintf("budget %s %d/window", s.Cell.action, s.Budget)
	case stepKill:
		l := ""
		if s.Loss != lossNone {
			l = ", store " + s.Loss
		}
		return fmt.Sprintf("kill after %v%s", s.Delay, l)
	case stepWait:
		return fmt.Sprintf("wait %v", s.Delay)
	}
	return string(s.Kind)
}

// schedule is one generated run.
type schedule struct {
	Seed int64
	// MaxPool is the daemon's max_pool_size: 0 gives every released
	// address back at once (unassign, detach, delete), 5 keeps some.
	MaxPool int
	Steps   []step
}

func (s schedule) String() string {
	parts := make([]string, len(s.Steps))
	for i, st := range s.Steps {
		parts[i] = st.String()
	}
	return fmt.Sprintf("seed %d, max_pool_size %d: %s", s.Seed, s.MaxPool, strings.Join(parts, "; "))
}

// burstTotal is how many pods the bursts of s name at most.
func (s schedule) burstTotal() int {
	n := 0
	for _, st := range s.Steps {
		if st.Kind == stepBurst {
			n += st.N
		}
	}
	return n
}

// genSchedule builds the schedule of seed: two or three episodes, each a
// disturbance or two (faults, slow transitions, throttling), a burst and a
// release that run into them, possibly a kill -9 (while calls are in
// flight, or in a quiet moment), a third of the kills losing the store,
// and possibly clearing the disturbances (otherwise they carry over, also
// across a restart).
func genSchedule(seed int64) schedule {
	r := rand.New(rand.NewPCG(uint64(seed), 0x7e57_5eed))
	re := rand.New(rand.NewPCG(uint64(seed), 0xe1b_5eed)) // EIP disturbances
	s := schedule{Seed: seed, MaxPool: []int{0, 0, 5}[r.IntN(3)]}
	add := func(st step) { s.Steps = append(s.Steps, st) }
	faults := 0
	episodes := 2 + r.IntN(2)
	for ep := 0; ep < episodes; ep++ {
		// Detach and Delete are called only when an ENI empties: an
		// episode that disturbs them releases everything, so that its
		// faults meet the calls they are for.
		empties := false
		if re.IntN(2) == 0 {
			add(genDisturbance(re, ep+1, eipActions, "e"))
		}
		for k := 1 + r.IntN(2); k > 0; k-- {
			faults++
			d := genDisturbance(r, faults, eniActions, "f")
			empties = empties || d.Cell.action == "DetachNetworkInterface" || d.Cell.action == "DeleteNetworkInterface"
			add(d)
		}
		burst := step{Kind: stepBurst, N: 3 + r.IntN(14), Async: r.IntN(2) == 0}
		release := step{Kind: stepRelease, Async: r.IntN(2) == 0}
		if r.IntN(5) < 2 || empties {
			release.N = 45 // everything running: empty ENIs go back to the cloud
		} else {
			release.N = 1 + r.IntN(burst.N)
		}
		// Where the kill goes: 0 none, 1 during the burst, 2 during the
		// release (or the shrink it starts), 3 at the end.
		killAt := 0
		if r.IntN(2) == 0 {
			killAt = 1 + r.IntN(3)
		}
		kill := func() {
			k := step{Kind: stepKill, Delay: time.Duration(r.IntN(150)) * time.Millisecond}
			switch r.IntN(6) {
			case 0:
				k.Loss = lossTruncate
			case 1:
				k.Loss = lossDelete
			}
			add(k)
		}
		add(burst)
		if killAt == 1 {
			kill()
		} else if r.IntN(2) == 0 {
			add(step{Kind: stepWait, Delay: time.Duration(r.IntN(200)) * time.Millisecond})
		}
		add(release)
		if killAt == 2 {
			kill()
		} else {
			add(step{Kind: stepWait, Delay: time.Duration(50+r.IntN(250)) * time.Millisecond})
		}
		if killAt == 3 {
			kill()
		}
		if r.IntN(5) < 3 {
			add(step{Kind: stepClear})
		}
	}
	return s
}

// genDisturbance picks a matrix cell of one of from and the step that
// disturbs it; its fault is named prefix and n.
func genDisturbance(r *rand.Rand, n int, from []string, prefix string) step {
	var kind string
	var actions []string
	for len(actions) == 0 { // a kind with no cell among from: draw again
		kind = matrixKinds[r.IntN(len(matrixKinds))]
		for _, a := range from {
			if inMatrix(cell{kind, a}) {
				actions = append(actions, a)
			}
		}
	}
	c := cell{kind, actions[r.IntN(len(actions))]}
	f := fakecloud.Fault{Name: fmt.Sprintf("%s%d", prefix, n), Action: c.action}
	// Count faults hit the first calls after they are installed;
	// probability faults keep hitting until cleared.
	if r.IntN(2) == 0 {
		f.Count = 1 + r.IntN(3)
	} else {
		f.Probability = 0.2 + 0.4*r.Float64()
	}
	switch kind {
	case kindError, kindConfirm:
		f.Kind, f.Code, f.Status = fakecloud.FaultError, "InternalError", 500
	case kindLost:
		// Applied, then the answer lost: the daemon sees 503 for a change
		// the cloud made.
		f.Kind, f.Lost, f.Code, f.Status = fakecloud.FaultLostResponse, "error", "ServiceUnavailable", 503
	case kindThrottle:
		if r.IntN(3) == 0 {
			// The cloud's own flow control: a tiny budget per window.
			return step{Kind: stepBudget, Cell: c, Budget: 1 + r.IntN(3)}
		}
		f.Kind, f.Code, f.Status = fakecloud.FaultError, throttleCodes[r.IntN(len(throttleCodes))], 400
	case kindSlow:
		// World time; fakecloud runs at time scale 0.01 (5 s → 50 ms).
		return step{Kind: stepSlow, Cell: c, Delay: time.Duration(3+r.IntN(38)) * time.Second}
	}
	return step{Kind: stepFault, Cell: c, Fault: f}
}
