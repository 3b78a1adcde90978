package report

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// PodAddress is a live pod and the addresses the API server shows for it.
type PodAddress struct {
	// Pod is "namespace/name".
	Pod  string       `json:"pod"`
	Node string       `json:"node"`
	IPs  []netip.Addr `json:"ips"`
}

// PodAddresses lists the live pods of pods with their status IPs, as the
// audit counts them: scheduled, not hostNetwork, not Succeeded or Failed
// (a terminating pod still holds its address).
func PodAddresses(pods []corev1.Pod) []PodAddress {
	var out []PodAddress
	for _, p := range pods {
		if p.Spec.HostNetwork || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		pa := PodAddress{Pod: p.Namespace + "/" + p.Name, Node: p.Spec.NodeName}
		for _, ip := range p.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				pa.IPs = append(pa.IPs, a)
			}
		}
		if len(pa.IPs) > 0 {
			out = append(out, pa)
		}
	}
	return out
}

// CheckUniqueAddresses: no address is held by two pods.
func CheckUniqueAddresses(pods []PodAddress) Result {
	r := Result{Invariant: InvUniqueAddrs}
	if len(pods) == 0 {
		r.Skipped = "no pod addresses collected"
		return r
	}
	holders := map[netip.Addr][]string{}
	n := 0
	for _, p := range pods {
		for _, ip := range p.IPs {
			holders[ip] = append(holders[ip], p.Pod+" on "+p.Node)
			n++
		}
	}
	for _, ip := range slices.SortedFunc(maps.Keys(holders), netip.Addr.Compare) {
		if h := holders[ip]; len(h) > 1 {
			r.violate(time.Time{}, "address %s is held by %d pods: %s", ip, len(h), strings.Join(h, ", "))
		}
	}
	r.Detail = fmt.Sprintf("%d address(es) of %d pod(s)", n, len(pods))
	return r
}

// CheckAddressesOnNodeENIs: every pod address is on an ENI InUse on its
// node's instance (instances maps node names to instance IDs), as its
// primary address or a secondary one.
func CheckAddressesOnNodeENIs(pods []PodAddress, world *admin.WorldView, instances map[string]string) Result {
	r := Result{Invariant: InvAddrsOnNodeENI}
	if len(pods) == 0 || world == nil {
		r.Skipped = "no pod addresses or no cloud world collected"
		return r
	}
	onENI := map[netip.Addr]*admin.ENIView{}
	for i := range world.ENIs {
		e := &world.ENIs[i]
		for _, ip := range append(append([]netip.Addr{e.PrimaryIP}, e.IPv4...), e.IPv6...) {
			onENI[ip] = e
		}
	}
	n := 0
	for _, p := range pods {
		inst, known := instances[p.Node]
		for _, ip := range p.IPs {
			n++
			e := onENI[ip]
			switch {
			case !known:
				r.violate(time.Time{}, "pod %s holds %s on node %s, whose instance is unknown", p.Pod, ip, p.Node)
			case e == nil:
				r.violate(time.Time{}, "pod %s on %s (%s) holds %s, which is on no ENI", p.Pod, p.Node, inst, ip)
			case e.InstanceID != inst:
				r.violate(time.Time{}, "pod %s on %s (%s) holds %s, which is on %s of %s", p.Pod, p.Node, inst, ip, e.ID, cmp.Or(e.InstanceID, "no instance"))
			case e.Status != admin.ENIInUse:
				r.violate(time.Time{}, "pod %s on %s (%s) holds %s, on its node's %s, which is %s", p.Pod, p.Node, inst, ip, e.ID, e.Status)
			}
		}
	}
	r.Detail = fmt.Sprintf("%d address(es) of %d pod(s) checked against %d ENI(s)", n, len(pods), len(world.ENIs))
	return r
}
