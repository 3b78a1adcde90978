package cluster

import (
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/terway-sim/terway/lab/audit"
)

// AuditInput points the audit at the lab's sources: fakecloud's world,
// the API server, each node's daemon (its store's records and its pool,
// asked over its socket) and each node's network namespace.
func (s *State) AuditInput(kube kubernetes.Interface) audit.Input {
	in := audit.Input{FakecloudURL: s.FakecloudURL, AdminToken: s.AdminToken, Kube: kube, Mode: s.Mode}
	for _, n := range s.Nodes {
		in.Nodes = append(in.Nodes, audit.NodeInput{Name: n.Name, InstanceID: n.InstanceID, NetNS: n.NetNS,
			Socket: n.HostPath("/run/eni/eni.socket")})
	}
	return in
}

// LiveAuditInput is AuditInput over the lab's state read again at each
// call (audit.RunUntilCleanOf): nodes come and go while an audit waits
// (node add, remove, release), and a released node is no longer audited.
func LiveAuditInput(dir string, kube kubernetes.Interface) func() (audit.Input, error) {
	return func() (audit.Input, error) {
		st, err := ReadState(dir)
		if err != nil {
			return audit.Input{}, fmt.Errorf("read the lab's state: %w", err)
		}
		return st.AuditInput(kube), nil
	}
}
