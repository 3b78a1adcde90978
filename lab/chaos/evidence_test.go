package chaos

import (
	"slices"
	"strings"
	"testing"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// A vSwitch exhaustion is proven by a call the dry vSwitch refused or by
// a read of it while drained, and by nothing else.
func TestProveExhaustion(t *testing.T) {
	stat := func(action, outcome string, n int64) admin.CallStat {
		return admin.CallStat{Action: action, InstanceID: "i-1", Outcome: outcome, Count: n}
	}
	before := []admin.CallStat{
		stat("DescribeVSwitches", admin.OutcomeSuccess, 4),
		stat("AssignPrivateIpAddresses", "InvalidVSwitchId.IpNotEnough", 1),
	}
	for _, tc := range []struct {
		name  string
		after []admin.CallStat
		want  int64
	}{
		{"nothing new", before, 0},
		{"reads", []admin.CallStat{stat("DescribeVSwitches", admin.OutcomeSuccess, 6), before[1]}, 2},
		{"refused", []admin.CallStat{before[0], stat("AssignPrivateIpAddresses", "InvalidVSwitchId.IpNotEnough", 4)}, 3},
		{"other calls", append(slices.Clone(before), stat("AssignPrivateIpAddresses", admin.OutcomeSuccess, 9),
			stat("DescribeVSwitches", "Throttling.User", 3)), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &stepRun{ScheduledStep: ScheduledStep{StepRef: StepRef{Kind: VSwitchExhaustion}}, before: before, after: tc.after, counted: true}
			n, ev := proveCalls(nil, st)
			if n != tc.want {
				t.Errorf("fired %d (%s), want %d", n, ev, tc.want)
			}
			if !strings.Contains(ev, "DescribeVSwitches") || !strings.Contains(ev, "IpNotEnough") {
				t.Errorf("evidence %q does not say what it counted", ev)
			}
		})
	}
}
