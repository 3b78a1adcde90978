package routectl

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// target is where a podCIDR should be routed: a node's instance.
type target struct {
	Node     string
	Instance string
}

// instanceOf returns the instance ID in an Alibaba provider ID,
// "<region>.<instance-id>" (cloud-controller-manager's format; a
// "scheme://" prefix is tolerated). A node of another region cannot be a
// next hop in this VPC.
func instanceOf(providerID, region string) (string, error) {
	s := providerID
	if _, rest, ok := strings.Cut(s, "://"); ok {
		s = rest
	}
	r, id, ok := strings.Cut(s, ".")
	if !ok || r == "" || id == "" || strings.Contains(id, ".") {
		return "", fmt.Errorf("provider ID %q is not <region>.<instance-id>", providerID)
	}
	if r != region {
		return "", fmt.Errorf("provider ID %q is in region %s, not %s", providerID, r, region)
	}
	return id, nil
}

// podCIDRs returns a node's pod CIDRs: spec.podCIDRs, or spec.podCIDR
// from a server that does not fill the list.
func podCIDRs(n *corev1.Node) ([]netip.Prefix, error) {
	raw := n.Spec.PodCIDRs
	if len(raw) == 0 && n.Spec.PodCIDR != "" {
		raw = []string{n.Spec.PodCIDR}
	}
	out := make([]netip.Prefix, 0, len(raw))
	for _, s := range raw {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("pod CIDR %q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// inside reports whether prefix p lies within cluster.
func inside(p, cluster netip.Prefix) bool {
	return p.Bits() >= cluster.Bits() && cluster.Contains(p.Addr())
}

// desired maps each podCIDR inside cluster to the node that holds it. A
// node that cannot be routed (no provider ID yet, another region, a
// malformed CIDR) is logged and skipped, never fatal to the others. When
// two nodes claim one CIDR, the first by name wins.
func desired(nodes []*corev1.Node, region string, cluster netip.Prefix, log *slog.Logger) map[netip.Prefix]target {
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	out := map[netip.Prefix]target{}
	for _, n := range nodes {
		cidrs, err := podCIDRs(n)
		if err != nil {
			log.Warn("node skipped", "node", n.Name, "err", err)
			continue
		}
		if len(cidrs) == 0 || n.Spec.ProviderID == "" {
			log.Debug("node not routable yet", "node", n.Name, "providerID", n.Spec.ProviderID, "podCIDRs", cidrs)
			continue
		}
		id, err := instanceOf(n.Spec.ProviderID, region)
		if err != nil {
			log.Warn("node skipped", "node", n.Name, "err", err)
			continue
		}
		for _, p := range cidrs {
			if !inside(p, cluster) {
				log.Debug("pod CIDR outside the cluster CIDR, not routed", "node", n.Name, "podCIDR", p, "clusterCIDR", cluster)
				continue
			}
			if t, ok := out[p]; ok {
				log.Warn("pod CIDR claimed by two nodes", "podCIDR", p, "routedTo", t.Node, "ignored", n.Name)
				continue
			}
			out[p] = target{Node: n.Name, Instance: id}
		}
	}
	return out
}
