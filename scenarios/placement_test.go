package scenarios

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func eni(id, typ, status, inst, primary string, secondaries ...string) fakecloud.ENIView {
	return fakecloud.ENIView{ENIInfo: fakecloud.ENIInfo{ID: id, Type: typ, PrimaryIP: netip.MustParseAddr(primary),
		IPv4: addrs(secondaries...)}, Status: status, InstanceID: inst}
}

// testWorld: node lab-1 is i-1 (by providerID), lab-2 is i-2 (by name).
func testWorld() *fakecloud.WorldView {
	return &fakecloud.WorldView{
		Instances: []fakecloud.InstanceInfo{{ID: "i-1", Name: "whatever"}, {ID: "i-2", Name: "lab-2"}},
		ENIs: []fakecloud.ENIView{
			eni("eni-p1", "Primary", "InUse", "i-1", "192.168.0.10", "192.168.0.99"),
			eni("eni-s1", "Secondary", "InUse", "i-1", "192.168.0.20", "192.168.0.21", "192.168.0.22"),
			eni("eni-s2", "Secondary", "InUse", "i-2", "192.168.1.20", "192.168.1.21"),
			eni("eni-av", "Secondary", "Available", "", "192.168.1.30", "192.168.1.31"),
		},
	}
}

func testNodes() []corev1.Node {
	return []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "lab-1"}, Spec: corev1.NodeSpec{ProviderID: "cn-hangzhou.i-1", PodCIDR: "172.20.0.0/24"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "lab-2"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"172.20.1.0/24"}}},
	}
}

func pod(name, node string, ips ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	return p
}

func TestNodeInstance(t *testing.T) {
	w, nodes := testWorld(), testNodes()
	for i, want := range []string{"i-1", "i-2"} {
		if got, ok := NodeInstance(nodes[i], w); !ok || got != want {
			t.Errorf("NodeInstance(%s) = %s, %v; want %s", nodes[i].Name, got, ok, want)
		}
	}
	ghost := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ghost"}, Spec: corev1.NodeSpec{ProviderID: "cn-hangzhou.i-9"}}
	if got, ok := NodeInstance(ghost, w); ok || got != "i-9" {
		t.Errorf("NodeInstance(ghost) = %s, %v", got, ok)
	}
}

func TestCheckPodAddressesENIMultiIP(t *testing.T) {
	pods := []corev1.Pod{
		pod("ok-secondary", "lab-1", "192.168.0.21"),
		pod("ok-eni-primary", "lab-1", "192.168.0.20"),
		pod("ok-by-name", "lab-2", "192.168.1.21"),
		pod("other-node", "lab-1", "192.168.1.21"),
		pod("primary-eni", "lab-1", "192.168.0.99"),
		pod("available-eni", "lab-2", "192.168.1.31"),
		pod("nowhere", "lab-2", "192.168.7.7"),
		pod("pending", ""),
	}
	got := CheckPodAddresses(mode.ENIMultiIP, testWorld(), testNodes(), pods)
	want := []string{
		"ns/other-node on lab-1: 192.168.1.21 is not on an ENI of instance i-1",
		"ns/primary-eni on lab-1: 192.168.0.99 is not on an InUse Secondary ENI (secondary of Primary ENI eni-p1",
		"ns/available-eni on lab-2: 192.168.1.31 is not on an ENI of instance i-2",
		"ns/nowhere on lab-2: 192.168.7.7 is on no ENI",
	}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s", strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}

func TestCheckPodAddressesENIOnlyAndVPC(t *testing.T) {
	got := CheckPodAddresses(mode.ENIOnly, testWorld(), testNodes(),
		[]corev1.Pod{pod("ok", "lab-1", "192.168.0.20"), pod("shared", "lab-1", "192.168.0.21")})
	if len(got) != 1 || !strings.Contains(got[0], "ns/shared") || !strings.Contains(got[0], "ENIOnly pods get an ENI's primary") {
		t.Errorf("ENIOnly problems: %q", got)
	}
	got = CheckPodAddresses(mode.VPC, nil, testNodes(), []corev1.Pod{
		pod("ok", "lab-1", "172.20.0.5"), pod("ok2", "lab-2", "172.20.1.5"), pod("wrong", "lab-2", "172.20.0.6"),
		pod("lost", "lab-3", "172.20.0.7"),
	})
	if len(got) != 2 || !strings.Contains(got[0], "ns/wrong on lab-2: 172.20.0.6 is outside the node's podCIDRs [172.20.1.0/24]") ||
		!strings.Contains(got[1], "node lab-3 unknown") {
		t.Errorf("VPC problems: %q", got)
	}
	if got := CheckPodAddresses(mode.ENIMultiIP, nil, testNodes(), []corev1.Pod{pod("a", "lab-1", "192.168.0.21")}); len(got) != 1 ||
		!strings.Contains(got[0], "no world") {
		t.Errorf("no world: %q", got)
	}
}

func TestIdleAndHeldAddresses(t *testing.T) {
	hostNet := pod("host", "lab-1", "192.168.0.10")
	hostNet.Spec.HostNetwork = true
	done := pod("done", "lab-1", "192.168.0.22")
	done.Status.Phase = corev1.PodSucceeded
	held := HeldAddresses([]corev1.Pod{pod("a", "lab-1", "192.168.0.21"), hostNet, done, pod("p", "")})
	if len(held) != 1 || len(held["lab-1"]) != 1 || !held["lab-1"][netip.MustParseAddr("192.168.0.21")] {
		t.Fatalf("held = %v", held)
	}
	w := testWorld()
	if got := IdleAddresses(mode.ENIMultiIP, w, "i-1", held["lab-1"]); got != 2 {
		t.Errorf("ENIMultiIP idle on i-1 = %d, want 2 (eni-s1's primary and .22)", got)
	}
	if got := IdleAddresses(mode.ENIOnly, w, "i-1", held["lab-1"]); got != 1 {
		t.Errorf("ENIOnly idle on i-1 = %d, want 1", got)
	}
	if got := IdleAddresses(mode.ENIOnly, w, "i-1", map[netip.Addr]bool{netip.MustParseAddr("192.168.0.20"): true}); got != 0 {
		t.Errorf("ENIOnly idle with the ENI held = %d", got)
	}
	if got := IdleAddresses(mode.VPC, w, "i-1", nil); got != 0 {
		t.Errorf("VPC idle = %d", got)
	}
}
