package chaos

import (
	"fmt"
	"slices"
	"strings"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// callMatch selects the call counters that prove a step fired.
type callMatch struct {
	// actions nil means any action.
	actions  []string
	outcomes []string
}

// count sums the matching counters.
func (m callMatch) count(calls []admin.CallStat) int64 {
	var n int64
	for _, c := range calls {
		if m.actions != nil && !slices.Contains(m.actions, c.Action) {
			continue
		}
		if !slices.Contains(m.outcomes, c.Outcome) {
			continue
		}
		n += c.Count
	}
	return n
}

// delta is how many matching calls happened between two readings; a
// reset of the counters in between leaves only the second.
func (m callMatch) delta(before, after []admin.CallStat) int64 {
	a, b := m.count(after), m.count(before)
	if a < b {
		return a
	}
	return a - b
}

func (m callMatch) String() string {
	actions := "any action"
	if m.actions != nil {
		actions = strings.Join(m.actions, ", ")
	}
	return fmt.Sprintf("calls of %s answered %s", actions, strings.Join(m.outcomes, " or "))
}

// match is the call accounting that proves a settings or vSwitch step
// fired; fault steps are proven by their faults' own counters.
func (st *stepRun) match() callMatch {
	p := st.Params
	actions := p.Actions
	if slices.Contains(actions, AllActions) {
		actions = nil
	}
	switch st.Kind {
	case SlowAsync:
		return callMatch{actions: []string{"AttachNetworkInterface", "DetachNetworkInterface"}, outcomes: []string{admin.OutcomeSuccess}}
	case ThrottleStorm:
		m := callMatch{actions: actions}
		// "*" is also the settings' key of the default code.
		for _, a := range p.Actions {
			if code := throttleCode(st.settings, a); !slices.Contains(m.outcomes, code) {
				m.outcomes = append(m.outcomes, code)
			}
		}
		return m
	case VSwitchExhaustion:
		return callMatch{outcomes: []string{exhaustionCode(st.settings)}}
	}
	return callMatch{}
}

// proveCalls proves a step by its calls while it was in place.
func proveCalls(_ *run, st *stepRun) (int64, string) {
	m := st.match()
	if !st.counted {
		return 0, fmt.Sprintf("no call counters read after the step, so no proof (%s)", m)
	}
	n := m.delta(st.before, st.after)
	return n, fmt.Sprintf("%d %s while in place", n, m)
}

// proveDone proves a process or node step by what it did.
func proveDone(_ *run, st *stepRun) (int64, string) {
	if len(st.did) == 0 {
		return st.done, "did nothing"
	}
	return st.done, strings.Join(st.did, "; ")
}
