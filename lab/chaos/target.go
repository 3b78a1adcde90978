package chaos

import (
	"fmt"
	"slices"
	"strings"
)

// Target scopes: what a step's Target may say. Random scopes are resolved
// when the step starts, among what the lab has then, by the step's Pick.
const (
	// TargetAll is every node (process kinds), every caller (cloud
	// kinds) or every vSwitch.
	TargetAll = "all"
	// TargetRandomNode is one node chosen by the schedule's seed.
	TargetRandomNode = "random-node"
	// TargetNode is "node:NAME", one named node.
	TargetNode = "node"
	// TargetRandomVSwitch is one vSwitch chosen by the schedule's seed.
	TargetRandomVSwitch = "random-vswitch"
	// TargetVSwitch is "vswitch:ID", one vSwitch.
	TargetVSwitch = "vswitch"
	// TargetRandomENI is secondary ENIs (or their addresses) of any node,
	// chosen by the schedule's seed.
	TargetRandomENI = "random-eni"
	// TargetENI is "eni:ID", one ENI.
	TargetENI = "eni"
	// TargetControlPlane is the lab's control plane (kube-apiserver).
	TargetControlPlane = "control-plane"
)

// namedScopes take ":" and what they name; the others stand alone.
var namedScopes = map[string]string{TargetNode: "NAME", TargetVSwitch: "ID", TargetENI: "ID"}

// target is a parsed Step.Target.
type target struct {
	scope, name string
}

// parseTarget reads "scope" or "scope:name"; "" is the kind's default.
func parseTarget(s string, k Kind) (target, error) {
	accepted := kinds[k].targets
	if s == "" {
		return target{scope: accepted[0]}, nil
	}
	scope, name, named := strings.Cut(s, ":")
	t := target{scope: scope, name: name}
	if !slices.Contains(accepted, scope) {
		return t, fmt.Errorf("target %q: %s takes %s", s, k, targetForms(accepted))
	}
	if _, takesName := namedScopes[scope]; takesName != named || (named && name == "") {
		return t, fmt.Errorf("target %q: %s takes %s", s, k, targetForms(accepted))
	}
	return t, nil
}

// random says whether the scope is chosen by the seed.
func (t target) random() bool {
	return t.scope == TargetRandomNode || t.scope == TargetRandomVSwitch || t.scope == TargetRandomENI
}

func (t target) String() string {
	if t.name != "" {
		return t.scope + ":" + t.name
	}
	return t.scope
}

// targetForms lists scopes as a user writes them.
func targetForms(scopes []string) string {
	forms := make([]string, len(scopes))
	for i, s := range scopes {
		forms[i] = s
		if what, ok := namedScopes[s]; ok {
			forms[i] = s + ":" + what
		}
	}
	return strings.Join(forms, ", ")
}
