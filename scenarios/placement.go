package scenarios

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
)

// The world's ENI type and status that pods' ENIs have.
const (
	eniSecondary = "Secondary"
	eniInUse     = "InUse"
)

// NodeInstance finds the ECS instance of a node: the instance ID of its
// providerID ("<region>.<instance>", the Alibaba cloud-controller-manager
// format the lab's kubelets use), or else the world's instance named like
// the node. ok is false when neither gives one the world has.
func NodeInstance(node corev1.Node, world *admin.WorldView) (id string, ok bool) {
	if _, inst, found := strings.Cut(node.Spec.ProviderID, "."); found && inst != "" {
		id = inst
	}
	for _, i := range world.Instances {
		if (id != "" && i.ID == id) || (id == "" && i.Name == node.Name) {
			return i.ID, true
		}
	}
	return id, false
}

// eniAddr is where an address lives in the world.
type eniAddr struct {
	eni  admin.ENIView
	role string // "primary", "secondary" or "ipv6"
}

func indexAddresses(world *admin.WorldView) map[netip.Addr]eniAddr {
	idx := map[netip.Addr]eniAddr{}
	for _, e := range world.ENIs {
		idx[e.PrimaryIP] = eniAddr{e, "primary"}
		for _, a := range e.IPv4 {
			idx[a] = eniAddr{e, "secondary"}
		}
		for _, a := range e.IPv6 {
			idx[a] = eniAddr{e, "ipv6"}
		}
	}
	return idx
}

// CheckPodAddresses checks that every address of every scheduled pod
// lives where the mode puts it, and returns one line per address that
// does not:
//
//   - ENIMultiIP: an address (secondary, or the primary, which the
//     daemon pools too) of a Secondary ENI that is InUse on the instance
//     of the pod's node;
//   - ENIOnly: the primary address of such an ENI (the pod has the whole
//     ENI), or one of its IPv6 addresses;
//   - VPC: inside the node's podCIDRs (world is not needed and may be nil).
func CheckPodAddresses(m mode.Mode, world *admin.WorldView, nodes []corev1.Node, pods []corev1.Pod) []string {
	byName := map[string]corev1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var idx map[netip.Addr]eniAddr
	if world != nil {
		idx = indexAddresses(world)
	}
	var problems []string
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Spec.HostNetwork {
			continue
		}
		node, ok := byName[p.Spec.NodeName]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s/%s: node %s unknown", p.Namespace, p.Name, p.Spec.NodeName))
			continue
		}
		for _, s := range podIPs(p) {
			if msg := checkAddress(m, world, idx, node, s); msg != "" {
				problems = append(problems, fmt.Sprintf("%s/%s on %s: %s %s", p.Namespace, p.Name, node.Name, s, msg))
			}
		}
	}
	return problems
}

func podIPs(p corev1.Pod) []string {
	var out []string
	for _, ip := range p.Status.PodIPs {
		out = append(out, ip.IP)
	}
	if len(out) == 0 && p.Status.PodIP != "" {
		out = append(out, p.Status.PodIP)
	}
	return out
}

// checkAddress says what is wrong with one pod address, or "".
func checkAddress(m mode.Mode, world *admin.WorldView, idx map[netip.Addr]eniAddr, node corev1.Node, s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "is not an address"
	}
	if m == mode.VPC {
		return checkPodCIDR(node, a)
	}
	if world == nil {
		return "cannot be checked: no world"
	}
	inst, ok := NodeInstance(node, world)
	if !ok {
		return fmt.Sprintf("cannot be checked: node has no instance in the world (providerID %q)", node.Spec.ProviderID)
	}
	at, ok := idx[a]
	if !ok {
		return "is on no ENI"
	}
	where := fmt.Sprintf("(%s of %s ENI %s, %s, instance %q)", at.role, at.eni.Type, at.eni.ID, at.eni.Status, at.eni.InstanceID)
	switch {
	case at.eni.InstanceID != inst:
		return "is not on an ENI of instance " + inst + " " + where
	case at.eni.Type != eniSecondary || at.eni.Status != eniInUse:
		return "is not on an InUse Secondary ENI " + where
	case m == mode.ENIOnly && at.role == "secondary":
		return "is a secondary address, but ENIOnly pods get an ENI's primary " + where
	}
	return ""
}

func checkPodCIDR(node corev1.Node, a netip.Addr) string {
	cidrs := node.Spec.PodCIDRs
	if len(cidrs) == 0 && node.Spec.PodCIDR != "" {
		cidrs = []string{node.Spec.PodCIDR}
	}
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Contains(a) {
			return ""
		}
	}
	return fmt.Sprintf("is outside the node's podCIDRs %v", cidrs)
}

// IdleAddresses counts what the world says a node's daemon holds idle:
// for ENIMultiIP the IPv4 addresses (primaries included) of the InUse
// Secondary ENIs of the instance that no pod holds; for ENIOnly those
// ENIs whose primary no pod holds. held are the addresses of every pod
// on the node. VPC mode has no cloud pool: 0.
func IdleAddresses(m mode.Mode, world *admin.WorldView, instanceID string, held map[netip.Addr]bool) int {
	n := 0
	for _, e := range world.ENIs {
		if e.InstanceID != instanceID || e.Type != eniSecondary || e.Status != eniInUse {
			continue
		}
		switch m {
		case mode.ENIMultiIP:
			for _, a := range append([]netip.Addr{e.PrimaryIP}, e.IPv4...) {
				if !held[a] {
					n++
				}
			}
		case mode.ENIOnly:
			if !held[e.PrimaryIP] {
				n++
			}
		}
	}
	return n
}

// HeldAddresses are the addresses of the pods (not host network, not
// finished) on each node.
func HeldAddresses(pods []corev1.Pod) map[string]map[netip.Addr]bool {
	out := map[string]map[netip.Addr]bool{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Spec.HostNetwork ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, s := range podIPs(p) {
			if a, err := netip.ParseAddr(s); err == nil {
				if out[p.Spec.NodeName] == nil {
					out[p.Spec.NodeName] = map[netip.Addr]bool{}
				}
				out[p.Spec.NodeName][a] = true
			}
		}
	}
	return out
}
