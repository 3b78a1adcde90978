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
// fired, any of its matches counting; fault steps are proven by their
// faults' own counters.
func (st *stepRun) match() []callMatch {
	p := st.Params
	actions := p.Actions
	if slices.Contains(actions, AllActions) {
		actions = nil
	}
	switch st.Kind {
	case SlowAsync:
		return []callMatch{{actions: []string{"AttachNetworkInterface", "DetachNetworkInterface"}, outcomes: []string{admin.OutcomeSuccess}}}
	case ThrottleStorm:
		m := callMatch{actions: actions}
		// "*" is also the settings' key of the default code.
		for _, a := range p.Actions {
			if code := throttleCode(st.settings, a); !slices.Contains(m.outcomes, code) {
				m.outcomes = append(m.outcomes, code)
			}
		}
		return []callMatch{m}
	case VSwitchExhaustion:
		// A daemon that reads the vSwitch dry makes no call the drain
		// could refuse (it waits for addresses instead), so a read
		// while drained is the fault meeting the daemon as much as a
		// refused call is.
		return []callMatch{
			{outcomes: []string{exhaustionCode(st.settings)}},
			{actions: []string{"DescribeVSwitches"}, outcomes: []string{admin.OutcomeSuccess}},
		}
	}
	return nil
}

// proveCalls proves a step by its calls while it was in place.
func proveCalls(_ *run, st *stepRun) (int64, string) {
	ms := st.match()
	var n int64
	said := make([]string, len(ms))
	for i, m := range ms {
		said[i] = m.String()
		if st.counted {
			d := m.delta(st.before, st.after)
			n += d
			said[i] = fmt.Sprintf("%d %s", d, m)
		}
	}
	if !st.counted {
		return 0, fmt.Sprintf("no call counters read after the step, so no proof (%s)", strings.Join(said, "; "))
	}
	return n, strings.Join(said, "; ") + " while in place"
}

// proveDone proves a process or node step by what it did.
func proveDone(_ *run, st *stepRun) (int64, string) {
	if len(st.did) == 0 {
		return st.done, "did nothing"
	}
	return st.done, strings.Join(st.did, "; ")
}
