package datapath

import (
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/terway-sim/terway/internal/testnetns"
)

// TestHostNetNSEmpty: the plugin runs in the node's namespace and leaves
// HostNetNS empty. Here the calling thread is moved into the test's node
// namespace (ns.Do locks it there), never the root's.
func TestHostNetNSEmpty(t *testing.T) {
	n := newNode(t)
	before := dump(t, n.nl)
	s := n.spec(VPCRoute, 0, podOpts{dual: true})
	s.HostNetNS = ""
	pod := newPod(t, s)
	var setupErr, checkErr error
	err := n.ns.Do(func(ns.NetNS) error {
		_, setupErr = Setup(s)
		checkErr = Check(s)
		return nil
	})
	if err != nil || setupErr != nil || checkErr != nil {
		t.Fatalf("in node netns: Do %v, Setup %v, Check %v", err, setupErr, checkErr)
	}
	requireLines(t, "node", dump(t, n.nl), wantVethHost(s)...)
	requireLines(t, "pod", dump(t, testnetns.Handle(t, pod.Path())), "link eth0 veth up mtu 1500")
	err = n.ns.Do(func(ns.NetNS) error { return Teardown(s) })
	if err != nil {
		t.Fatalf("Teardown in node netns: %v", err)
	}
	requireSame(t, "node after Teardown", before, dump(t, n.nl))
}
