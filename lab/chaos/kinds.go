package chaos

import (
	"slices"
)

// Kind is a fault kind: what a step does to the lab.
type Kind string

// Cloud fault kinds, applied through fakecloud's admin API.
const (
	// CloudErrors fails a share of the calls of chosen actions with an
	// error code before they change anything.
	CloudErrors Kind = "cloud-errors"
	// LostAnswers applies a share of the calls of chosen actions, then
	// loses the answer (an error, or no answer until the client gives up).
	LostAnswers Kind = "lost-answers"
	// SlowAsync makes attach and detach transitions slow (30 s by
	// default) through fakecloud's settings, restored afterwards.
	SlowAsync Kind = "slow-async"
	// ThrottleStorm cuts the throttle budget of chosen actions to one call
	// per throttle window (one minute by default) through the settings,
	// restored afterwards.
	ThrottleStorm Kind = "throttle-storm"
	// VSwitchExhaustion takes a vSwitch's free addresses away and gives
	// them back at the end.
	VSwitchExhaustion Kind = "vswitch-exhaustion"
	// MetadataOutage makes the metadata service answer 5xx, or hang until
	// the step ends.
	MetadataOutage Kind = "metadata-outage"
	// MetadataStale makes the metadata service answer with stale data.
	MetadataStale Kind = "metadata-stale"
	// Consistency hides the ENIs CreateNetworkInterface creates from
	// Describe for a while (eventual consistency after Create).
	Consistency Kind = "consistency"
)

// Process fault kinds, applied through the lab supervisor.
const (
	// KillTerwayd kills the terwayd container of a node with SIGKILL at
	// the step's kill moments; kubelet restarts it.
	KillTerwayd Kind = "kill-terwayd"
	// RestartContainerd kills a node's containerd and starts it again
	// after the downtime.
	RestartContainerd Kind = "restart-containerd"
	// RestartKubelet kills a node's kubelet and starts it again after the
	// downtime: a DEL that never comes, which CNI GC must clean up.
	RestartKubelet Kind = "restart-kubelet"
	// RestartAPIServer kills kube-apiserver and starts it again after the
	// downtime.
	RestartAPIServer Kind = "restart-apiserver"
)

// Node fault kinds: instance lifecycle through the lab supervisor, and an
// operator's out-of-band actions through the ordinary ECS API.
const (
	// NodeStopStart stops a node's instance (a power-off: ENIs unplugged)
	// at the step's start and starts it at its end.
	NodeStopStart Kind = "node-stop-start"
	// NodeRelease releases a node's instance: node death, not undone.
	NodeRelease Kind = "node-release"
	// ENIDetachOOB detaches secondary ENIs of a node out of band.
	ENIDetachOOB Kind = "eni-detach-oob"
	// ENIDeleteOOB detaches and deletes secondary ENIs out of band.
	ENIDeleteOOB Kind = "eni-delete-oob"
	// IPUnassignOOB unassigns secondary addresses out of band.
	IPUnassignOOB Kind = "ip-unassign-oob"
)

// Class groups kinds by what they act on.
type Class string

// Classes of fault kinds.
const (
	ClassCloud   Class = "cloud"
	ClassProcess Class = "process"
	ClassNode    Class = "node"
)

// Components a process fault kills, as Lab.Kill names them.
const (
	ComponentTerwayd    = "terwayd"
	ComponentContainerd = "containerd"
	ComponentKubelet    = "kubelet"
	ComponentAPIServer  = "kube-apiserver"
)

// kindSpec says what a kind accepts and how it behaves.
type kindSpec struct {
	class Class
	// params are the names (JSON) of the Params fields the kind reads.
	params []string
	// targets are the target scopes it accepts, the default first.
	targets []string
	// exclusive kinds restore state they saved when applied, so two steps
	// of the kind must not overlap.
	exclusive bool
	// needs says which of the engine's clients the kind uses.
	needs needs
	// about is one line for listings.
	about string
}

// needs are the engine clients a kind uses.
type needs struct{ cloud, lab, operator bool }

var nodeTargets = []string{TargetRandomNode, TargetNode, TargetAll}
var callerTargets = []string{TargetAll, TargetRandomNode, TargetNode}
var eniTargets = []string{TargetRandomENI, TargetENI, TargetRandomNode, TargetNode}

var kinds = map[Kind]kindSpec{
	CloudErrors: {class: ClassCloud, params: []string{"actions", "percent", "code"}, targets: callerTargets,
		needs: needs{cloud: true}, about: "p% of the calls of chosen actions fail with an error code"},
	LostAnswers: {class: ClassCloud, params: []string{"actions", "percent", "code", "lost"}, targets: callerTargets,
		needs: needs{cloud: true}, about: "p% of the calls of chosen actions are applied, their answer lost"},
	SlowAsync: {class: ClassCloud, params: []string{"delay"}, targets: []string{TargetAll}, exclusive: true,
		needs: needs{cloud: true}, about: "attach and detach take delay (30s) of world time"},
	ThrottleStorm: {class: ClassCloud, params: []string{"actions", "budget"}, targets: []string{TargetAll}, exclusive: true,
		needs: needs{cloud: true}, about: "the throttle budget of chosen actions is cut to budget (1) per window"},
	VSwitchExhaustion: {class: ClassCloud, params: []string{"leave"}, targets: []string{TargetAll, TargetRandomVSwitch, TargetVSwitch},
		exclusive: true, needs: needs{cloud: true}, about: "vSwitches drained to leave (0) free addresses, refilled after"},
	MetadataOutage: {class: ClassCloud, params: []string{"mode", "percent"}, targets: callerTargets,
		needs: needs{cloud: true}, about: "the metadata service answers 5xx, or hangs until the step ends"},
	MetadataStale: {class: ClassCloud, params: []string{"percent"}, targets: callerTargets,
		needs: needs{cloud: true}, about: "the metadata service answers with stale data"},
	Consistency: {class: ClassCloud, params: []string{"delay"}, targets: callerTargets,
		needs: needs{cloud: true}, about: "a created ENI stays missing from Describe for delay (5s)"},
	KillTerwayd: {class: ClassProcess, params: []string{"kills"}, targets: nodeTargets,
		needs: needs{lab: true}, about: "kill -9 of the terwayd container at kills (3) random moments"},
	RestartContainerd: {class: ClassProcess, params: []string{"kills", "downtime"}, targets: nodeTargets,
		needs: needs{lab: true}, about: "containerd killed at kills (1) random moments, back after downtime (10s)"},
	RestartKubelet: {class: ClassProcess, params: []string{"kills", "downtime"}, targets: nodeTargets,
		needs: needs{lab: true}, about: "kubelet killed at kills (1) random moments, back after downtime (10s)"},
	RestartAPIServer: {class: ClassProcess, params: []string{"kills", "downtime"}, targets: []string{TargetControlPlane},
		needs: needs{lab: true}, about: "kube-apiserver killed at kills (1) random moments, back after downtime (10s)"},
	NodeStopStart: {class: ClassNode, targets: []string{TargetRandomNode, TargetNode}, exclusive: true,
		needs: needs{lab: true}, about: "a node's instance stopped at the start, started at the end"},
	NodeRelease: {class: ClassNode, targets: []string{TargetRandomNode, TargetNode},
		needs: needs{lab: true}, about: "a node's instance released (node death), not undone"},
	ENIDetachOOB: {class: ClassNode, params: []string{"count"}, targets: eniTargets,
		needs: needs{cloud: true, operator: true}, about: "count (1) secondary ENIs detached by an operator"},
	ENIDeleteOOB: {class: ClassNode, params: []string{"count"}, targets: eniTargets,
		needs: needs{cloud: true, operator: true}, about: "count (1) secondary ENIs detached and deleted by an operator"},
	IPUnassignOOB: {class: ClassNode, params: []string{"count"}, targets: eniTargets,
		needs: needs{cloud: true, operator: true}, about: "count (1) secondary addresses unassigned by an operator"},
}

// Kinds lists every fault kind, sorted.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Class is the class of k ("" for an unknown kind).
func (k Kind) Class() Class { return kinds[k].class }

// About describes k in one line.
func (k Kind) About() string { return kinds[k].about }

// Targets lists the target forms k accepts, its default first.
func (k Kind) Targets() string { return targetForms(kinds[k].targets) }

// Params lists the parameters (their JSON names) k reads.
func (k Kind) Params() []string { return slices.Clone(kinds[k].params) }
