package cni

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terway-sim/terway/cni/datapath"
)

// TestReadRecords reads back what the plugin saves, as the daemon does
// when it restores from the node's truth, and keeps reading past a
// damaged file.
func TestReadRecords(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	if recs, errs := ReadRecords(dir); len(recs) != 0 || len(errs) != 0 {
		t.Fatalf("missing dir: %v %v", recs, errs)
	}
	s := stateStore{dir: dir}
	v4, v6 := netip.MustParseAddr("192.168.0.7"), netip.MustParseAddr("fd00::7")
	a := &attachment{ContainerID: "abc", IfName: "eth0", Pod: PodID{Namespace: "ns", Name: "p"}, IPType: "TypeENIMultiIP",
		Spec: &datapath.Spec{Kind: datapath.PolicyRoute, IfName: "eth0", HostVeth: "cali0", PodNetNS: "/run/netns/x", IPv4: v4, IPv6: v6}}
	if err := s.save(a); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "torn.json"), []byte(`{"version":1,"containerID":`), 0o600); err != nil {
		t.Fatal(err)
	}
	recs, errs := ReadRecords(dir)
	if len(recs) != 1 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "torn.json") {
		t.Fatalf("records %+v, errors %v", recs, errs)
	}
	r := recs[0]
	if r.ContainerID != "abc" || r.IfName != "eth0" || r.Namespace != "ns" || r.Name != "p" || r.NetNS != "/run/netns/x" ||
		r.IPv4 != v4 || r.IPv6 != v6 {
		t.Errorf("record %+v", r)
	}
}
