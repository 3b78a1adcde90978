package datapath

import (
	"crypto/sha1" //nolint:gosec // the formula under test
	"encoding/hex"
	"testing"
)

func TestVethName(t *testing.T) {
	for _, tc := range []struct{ prefix, ns, name, ifName, want string }{
		// printf 'default.nginx' | sha1sum
		{"cali", "default", "nginx", "eth0", "calic440f455693"},
		// printf 'kube-system.coredns-abcdeth1' | sha1sum
		{"cali", "kube-system", "coredns-abcd", "eth1", "calif557cae8206"},
	} {
		if got := VethName(tc.prefix, tc.ns, tc.name, tc.ifName); got != tc.want {
			t.Errorf("VethName(%q, %q, %q, %q) = %q, want %q", tc.prefix, tc.ns, tc.name, tc.ifName, got, tc.want)
		}
	}
	// The formula, for an ifName other than eth0 and a custom prefix.
	sum := sha1.Sum([]byte("team-a.web-0net1"))
	if got, want := VethName("veth", "team-a", "web-0", "net1"), "veth"+hex.EncodeToString(sum[:])[:11]; got != want {
		t.Errorf("VethName = %q, want %q", got, want)
	}
	if VethName("cali", "a", "b", "eth0") != VethName("cali", "a", "b", "") {
		t.Error("eth0 and the empty ifName name different veths")
	}
}
