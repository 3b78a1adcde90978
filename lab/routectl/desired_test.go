package routectl

import (
	"errors"
	"log/slog"
	"net/netip"
	"testing"

	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInstanceOf(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"cn-hangzhou.i-bp1abc", "i-bp1abc", true},
		{"alicloud://cn-hangzhou.i-bp1abc", "i-bp1abc", true},
		{"cn-beijing.i-bp1abc", "", false},
		{"i-bp1abc", "", false},
		{"cn-hangzhou.", "", false},
		{"cn-hangzhou.i-a.b", "", false},
		{"", "", false},
	} {
		got, err := instanceOf(tc.in, "cn-hangzhou")
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("instanceOf(%q) = %q, %v; want %q, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func testNode(name, providerID string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID, PodCIDRs: cidrs}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
	}
	return n
}

func TestDesired(t *testing.T) {
	cluster := netip.MustParsePrefix("172.20.0.0/16")
	nodes := []*corev1.Node{
		testNode("b", "cn-hangzhou.i-b", "172.20.1.0/24"), // same CIDR as a: a wins by name
		testNode("a", "cn-hangzhou.i-a", "172.20.1.0/24", "fd00:20::/64"),
		testNode("c", "cn-hangzhou.i-c", "10.0.0.0/24"), // outside the cluster CIDR
		testNode("d", "", "172.20.4.0/24"),              // no provider ID yet
		testNode("e", "cn-beijing.i-e", "172.20.5.0/24"),
		testNode("f", "cn-hangzhou.i-f", "bogus"),
		testNode("g", "cn-hangzhou.i-g"),
		{ObjectMeta: metav1.ObjectMeta{Name: "h"}, Spec: corev1.NodeSpec{ProviderID: "cn-hangzhou.i-h", PodCIDR: "172.20.8.0/24"}},
		testNode("i", "cn-hangzhou.i-i", "172.20.0.0/15"), // wider than the cluster CIDR
	}
	got := desired(nodes, "cn-hangzhou", cluster, slog.New(slog.DiscardHandler))
	want := map[netip.Prefix]target{
		netip.MustParsePrefix("172.20.1.0/24"): {Node: "a", Instance: "i-a"},
		netip.MustParsePrefix("172.20.8.0/24"): {Node: "h", Instance: "i-h"},
	}
	if len(got) != len(want) {
		t.Fatalf("desired = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("desired[%s] = %v, want %v", k, got[k], v)
		}
	}
}

func TestPlanFor(t *testing.T) {
	cluster := netip.MustParsePrefix("172.20.0.0/16")
	pfx := netip.MustParsePrefix
	want := map[netip.Prefix]target{
		pfx("172.20.1.0/24"): {Node: "a", Instance: "i-a"}, // present, Available
		pfx("172.20.2.0/24"): {Node: "b", Instance: "i-b"}, // present, Pending
		pfx("172.20.3.0/24"): {Node: "c", Instance: "i-c"}, // points to the wrong instance
		pfx("172.20.4.0/24"): {Node: "d", Instance: "i-d"}, // missing
		pfx("172.20.5.0/24"): {Node: "e", Instance: "i-e"}, // held by a foreign ENI route
	}
	have := []routeEntry{
		{ID: "r1", Dst: pfx("172.20.1.0/24"), HopType: "Instance", HopID: "i-a", Type: "Custom", Status: "Available"},
		{ID: "r2", Dst: pfx("172.20.2.0/24"), HopType: "Instance", HopID: "i-b", Type: "Custom", Status: "Pending"},
		{ID: "r3", Dst: pfx("172.20.3.0/24"), HopType: "Instance", HopID: "i-old", Type: "Custom", Status: "Available"},
		{ID: "r5", Dst: pfx("172.20.5.0/24"), HopType: "NetworkInterface", HopID: "eni-x", Type: "Custom", Status: "Available"},
		{ID: "r6", Dst: pfx("172.20.9.0/24"), HopType: "Instance", HopID: "i-gone", Type: "Custom", Status: "Available"},
		{ID: "r7", Dst: pfx("10.0.0.0/8"), HopType: "Instance", HopID: "i-x", Type: "Custom", Status: "Available"},
		{ID: "r8", Dst: pfx("192.168.0.0/24"), HopType: "local", Type: "System", Status: "Available"},
		{ID: "r9", Dst: pfx("172.20.10.0/24"), HopType: "NetworkInterface", HopID: "eni-y", Type: "Custom", Status: "Available"},
	}
	p := planFor(want, have, cluster)
	ids := func(es []routeEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	if got := ids(p.remove); len(got) != 2 || got[0] != "r3" || got[1] != "r6" {
		t.Errorf("remove = %v, want [r3 r6]", got)
	}
	if len(p.add) != 2 || p.add[0] != pfx("172.20.3.0/24") || p.add[1] != pfx("172.20.4.0/24") {
		t.Errorf("add = %v, want [172.20.3.0/24 172.20.4.0/24]", p.add)
	}
	if len(p.pending) != 1 || p.pending[0] != pfx("172.20.2.0/24") {
		t.Errorf("pending = %v, want [172.20.2.0/24]", p.pending)
	}
	if got := ids(p.blocked); len(got) != 1 || got[0] != "r5" {
		t.Errorf("blocked = %v, want [r5]", got)
	}
}

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		code   string
		status int
		want   bool
	}{
		{"Throttling.User", 400, true},
		{"InternalError", 500, true},
		{codeEntryStatus, 400, true},
		{"OperationConflict", 400, true},
		{"IncorrectStatus.RouteTableStatus", 400, true},
		{codeDuplicate, 400, false},
		{"InvalidNextHopId.NotFound", 404, false},
	} {
		err := sdkerrors.NewServerError(tc.status, `{"Code":"`+tc.code+`","Message":"m"}`, "")
		if got := retryable(err); got != tc.want {
			t.Errorf("retryable(%s) = %v, want %v", tc.code, got, tc.want)
		}
	}
	if retryable(errors.New("plain")) {
		t.Error("a plain error must not be retryable")
	}
}
