package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// Catalogue returns the named plans, sorted by name: at least one per
// fault kind, and a mix. Each runs a rollout of DefaultPods pods from the
// schedule's start and states its invariants' time limits; the plans
// whose faults are on the allocation path start on cold pools. The caller
// owns the plans returned.
func Catalogue() []Plan {
	plans := []Plan{
		// The allocation-path faults start with the rollout: a cold,
		// fresh lab's nodes had created and filled their ENIs within 5s.
		cold(plan("cloud-errors", "30% InternalError on the allocation path during the rollout", 2, 5,
			step(CloudErrors, 0, 90, "", Params{}))),
		cold(plan("lost-answers", "20% of allocation calls applied and answered with an error", 2, 5,
			step(LostAnswers, 0, 90, "", Params{}))),
		cold(plan("lost-answers-timeout", "half of the allocation calls applied and never answered", 3, 6,
			step(LostAnswers, 0, 90, "", Params{Percent: 50, Lost: "timeout"}))),
		cold(plan("slow-async", "attach and detach take 30s for two minutes", 3, 7,
			step(SlowAsync, 0, 120, "", Params{}))),
		cold(plan("throttle-storm", "allocation calls throttled to one a minute for two minutes", 3, 7,
			step(ThrottleStorm, 0, 120, "", Params{}))),
		// Cold pools: warm ones (max_pool_size 10 on each of three
		// nodes) served the whole rollout without a call, so the fault
		// never met one. A cold node reads its dry vSwitch (Describe)
		// and waits, or is refused the Create or Assign: either is the
		// fault firing. Dry from the start: a fresh lab's rollout was done
		// in 5s.
		cold(plan("vswitch-exhaustion", "every vSwitch runs dry as the rollout starts, for 90s, then is refilled", 3, 6,
			step(VSwitchExhaustion, 0, 90, "", Params{}))),
		plan("metadata-outage", "the metadata service answers 5xx on every node for a minute", 2, 5,
			step(MetadataOutage, 5, 60, "", Params{})),
		plan("metadata-hang", "the metadata service hangs on every node for a minute", 2, 5,
			step(MetadataOutage, 5, 60, "", Params{Mode: "hang"})),
		plan("metadata-stale", "the metadata service answers stale data for 90s", 2, 5,
			step(MetadataStale, 5, 90, "", Params{})),
		cold(plan("consistency", "new ENIs stay missing from Describe for 10s after Create", 2, 5,
			step(Consistency, 0, 90, "", Params{Delay: admin.Duration(10 * time.Second)}))),
		plan("kill-terwayd", "terwayd killed with SIGKILL three times on a node during the rollout", 2, 5,
			step(KillTerwayd, 5, 90, TargetRandomNode, Params{})),
		plan("kill-terwayd-everywhere", "terwayd killed five times on every node during the rollout", 3, 6,
			step(KillTerwayd, 5, 120, TargetAll, Params{Kills: 5})),
		plan("restart-containerd", "a node's containerd down for 10s during the rollout", 2, 5,
			step(RestartContainerd, 20, 60, TargetRandomNode, Params{})),
		plan("restart-kubelet", "a node's kubelet down for 20s: DELs that never come, CNI GC cleans up", 3, 6,
			step(RestartKubelet, 20, 60, TargetRandomNode, Params{Downtime: admin.Duration(20 * time.Second)})),
		plan("restart-apiserver", "kube-apiserver down for 15s during the rollout", 2, 5,
			step(RestartAPIServer, 20, 60, "", Params{Downtime: admin.Duration(15 * time.Second)})),
		plan("node-stop-start", "a node's instance stopped for a minute after the rollout, then started", 3, 6,
			step(NodeStopStart, 45, 60, TargetRandomNode, Params{})),
		plan("node-release", "a node's instance released after the rollout: its pods rescheduled, its ENIs gone", 3, 6,
			step(NodeRelease, 45, 90, TargetRandomNode, Params{})),
		plan("eni-detach-oob", "an operator detaches a secondary ENI in use", 3, 5,
			step(ENIDetachOOB, 45, 75, TargetRandomENI, Params{})),
		plan("eni-delete-oob", "an operator detaches and deletes a secondary ENI in use", 3, 5,
			step(ENIDeleteOOB, 45, 75, TargetRandomENI, Params{})),
		plan("ip-unassign-oob", "an operator unassigns three secondary addresses", 3, 5,
			step(IPUnassignOOB, 45, 75, TargetRandomENI, Params{Count: 3})),
		// The throttling starts with the rollout, on the calls a cold
		// node makes: ENIs are created with the addresses they will
		// carry, so a rollout that is over by +30s made no Assign for a
		// later storm on Assign alone to meet.
		cold(plan("storm", "cloud errors, a throttling storm on ENI creation and address assignment, and terwayd kills together", 3, 7,
			step(CloudErrors, 0, 120, "", Params{Percent: 20}),
			step(ThrottleStorm, 0, 60, "", Params{Actions: []string{"CreateNetworkInterface", "AssignPrivateIpAddresses"}}),
			step(KillTerwayd, 10, 120, TargetRandomNode, Params{Kills: 2}))),
		// Every pod asks for an EIP; the rolling restart inside the window
		// deletes them, so that unbinding and releasing meet the faults
		// too, and terwayd dies in the middle of EIP calls.
		withEIP(plan("eip", "EIP calls lose answers and fail, and terwayd is killed, while every pod gets and gives back an EIP", 3, 7,
			step(LostAnswers, 0, 120, "", Params{Actions: eipActions, Percent: 30}),
			step(CloudErrors, 0, 120, "", Params{Actions: eipActions, Percent: 20}),
			step(KillTerwayd, 10, 120, TargetRandomNode, Params{Kills: 3}))),
	}
	slices.SortFunc(plans, func(a, b Plan) int { return cmp.Compare(a.Name, b.Name) })
	return plans
}

// Lookup returns the catalogue's plan called name.
func Lookup(name string) (Plan, error) {
	plans := Catalogue()
	if i := slices.IndexFunc(plans, func(p Plan) bool { return p.Name == name }); i >= 0 {
		return plans[i], nil
	}
	names := make([]string, len(plans))
	for i, p := range plans {
		names[i] = p.Name
	}
	return Plan{}, fmt.Errorf("no plan %q in the catalogue (plans: %s)", name, strings.Join(names, ", "))
}

// plan builds a catalogue plan of the default rollout; auditClean and
// podsReady are in minutes.
func plan(name, description string, auditClean, podsReady int, steps ...Step) Plan {
	return Plan{Name: name, Description: description, Workload: Workload{Pods: DefaultPods},
		Invariants: Invariants{AuditClean: admin.Duration(time.Duration(auditClean) * time.Minute),
			PodsReady: admin.Duration(time.Duration(podsReady) * time.Minute)},
		Steps: steps}
}

// cold makes p start on cold pools (Workload.ColdPools): its faults are
// on the allocation path, which a warm lab's pools answer without a call.
func cold(p Plan) Plan {
	p.Workload.ColdPools = true
	return p
}

// eipActions are the EIP calls of a pod's ADD and DEL.
var eipActions = []string{"AllocateEipAddress", "AssociateEipAddress", "UnassociateEipAddress", "ReleaseEipAddress"}

// withEIP gives every pod of p's rollout an EIP, with a rolling restart
// inside the faults' window.
func withEIP(p Plan) Plan {
	p.Workload.EIP = true
	p.Workload.Restarts = 1
	return p
}

// step builds a catalogue step; start and duration are in seconds.
func step(k Kind, start, duration int, target string, p Params) Step {
	return Step{Kind: k, Start: admin.Duration(time.Duration(start) * time.Second),
		Duration: admin.Duration(time.Duration(duration) * time.Second), Target: target, Params: p}
}
