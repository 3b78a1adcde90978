package audit

import (
	"testing"

	"github.com/terway-sim/terway/fakecloud"
)

// eipSnapshot is the base snapshot with pod ns/a holding EIP eip-a,
// recorded and bound to its address.
func eipSnapshot() *snapshot {
	s := baseSnapshot()
	s.world.EIPs = []fakecloud.EIPView{{ID: "eip-a", Address: "198.18.0.1", Status: fakecloud.EIPInUse,
		InstanceID: "eni-s", PrivateIP: ipPod.String(), Name: "terway-i-1"}}
	a := &s.nodes[0].store.atts[0]
	a.Resources = append(a.Resources, resource{Type: resourceEIP, ID: "eip-a", ENIID: "eni-s"})
	return s
}

func TestAnalyzeEIPs(t *testing.T) {
	r := analyze(eipSnapshot())
	expectKinds(t, r)
	if r.Nodes[0].Counts.EIPs != 1 {
		t.Fatalf("counts %+v", r.Nodes[0].Counts)
	}
	for _, tc := range []struct {
		name string
		mut  func(s *snapshot)
		want []Kind
	}{
		{"an EIP of the node's daemon that no record has", func(s *snapshot) {
			s.world.EIPs = append(s.world.EIPs, fakecloud.EIPView{ID: "eip-x", Address: "198.18.0.2",
				Status: fakecloud.EIPAvailable, Name: "terway-i-1"})
		}, []Kind{KindLeakedEIP}},
		{"the same, while an allocation is in flight", func(s *snapshot) {
			s.world.EIPs = append(s.world.EIPs, fakecloud.EIPView{ID: "eip-x", Address: "198.18.0.2",
				Status: fakecloud.EIPAvailable, Name: "terway-i-1"})
			s.nodes[0].store.intents = append(s.nodes[0].store.intents, intent{Key: "eip/ns/b/u-b", Kind: eipAllocating})
		}, nil},
		{"a user's EIP bound to a node address no record has", func(s *snapshot) {
			s.world.EIPs = append(s.world.EIPs, fakecloud.EIPView{ID: "eip-u", Address: "198.18.0.3",
				Status: fakecloud.EIPInUse, InstanceID: "eni-s", PrivateIP: "192.168.0.22"})
		}, []Kind{KindLeakedEIP}},
		{"someone else's EIP elsewhere", func(s *snapshot) {
			s.world.EIPs = append(s.world.EIPs, fakecloud.EIPView{ID: "eip-o", Address: "198.18.0.4", Status: fakecloud.EIPAvailable})
		}, nil},
		{"a recorded EIP the cloud does not have", func(s *snapshot) {
			s.world.EIPs = nil
		}, []Kind{KindMissingEIP}},
		{"a recorded EIP bound to another address", func(s *snapshot) {
			s.world.EIPs[0].PrivateIP = "192.168.0.22"
		}, []Kind{KindEIPMismatch}},
		{"a recorded EIP unbound", func(s *snapshot) {
			s.world.EIPs[0].Status, s.world.EIPs[0].InstanceID, s.world.EIPs[0].PrivateIP = fakecloud.EIPAvailable, "", ""
		}, []Kind{KindEIPMismatch}},
		{"one EIP recorded twice", func(s *snapshot) {
			b := s.nodes[0].store.atts[0]
			b.PodName, b.PodUID = "b", "u-b"
			b.Resources = []resource{b.Resources[1]}
			s.nodes[0].store.atts = append(s.nodes[0].store.atts, b)
		}, []Kind{KindDuplicateEIP, KindStoreOrphan}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := eipSnapshot()
			tc.mut(s)
			expectKinds(t, analyze(s), tc.want...)
		})
	}
}
