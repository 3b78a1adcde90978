package audit

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
)

// The synthetic world: node-1 on i-1 with the Primary ENI eni-p (.10)
// and the Secondary ENI eni-s (.20 primary, .21-.23 secondary), pod ns/a
// holding .21; the pool has the rest idle.
var (
	t0      = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ipPod   = netip.MustParseAddr("192.168.0.21")
	ipNode  = netip.MustParseAddr("192.168.0.10")
	macENIs = "00:16:3e:00:00:02"
)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func baseSnapshot() *snapshot {
	vsw := fakecloud.VSwitchView{ID: "vsw-1", VPCID: "vpc-1", CIDR: netip.MustParsePrefix("192.168.0.0/24"),
		Gateway: addr("192.168.0.253")}
	eni := func(id, typ, mac string, primary netip.Addr, ips ...netip.Addr) fakecloud.ENIView {
		v := fakecloud.ENIView{ENIInfo: fakecloud.ENIInfo{ID: id, Type: typ, MAC: mac, VSwitchID: "vsw-1", CIDR: vsw.CIDR,
			Gateway: vsw.Gateway, PrimaryIP: primary, IPv4: ips}, Status: fakecloud.ENIInUse, InstanceID: "i-1", VPCID: "vpc-1"}
		if typ == fakecloud.ENITypeSecondary {
			v.Tags = map[string]string{cloud.TagCreator: cloud.CreatorTerway, cloud.TagInstanceID: "i-1"}
		}
		return v
	}
	w := &fakecloud.WorldView{
		Instances: []fakecloud.InstanceInfo{{ID: "i-1", VPCID: "vpc-1", Status: fakecloud.StatusRunning}},
		VSwitches: []fakecloud.VSwitchView{vsw},
		ENIs: []fakecloud.ENIView{
			eni("eni-p", fakecloud.ENITypePrimary, "00:16:3e:00:00:01", ipNode),
			eni("eni-s", fakecloud.ENITypeSecondary, macENIs, addr("192.168.0.20"),
				ipPod, addr("192.168.0.22"), addr("192.168.0.23")),
		},
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: k8stypes.UID("u-a")},
		Spec:   corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ipPod.String()}}}}
	k := &kubeView{pods: map[string]*corev1.Pod{"ns/a": pod}, nodes: map[string]*corev1.Node{
		"node-1": {ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{ProviderID: "cn-hangzhou.i-1"}}}}
	st := &storeView{atts: []attachment{{PodNamespace: "ns", PodName: "a", PodUID: "u-a", IfName: "eth0",
		IPType: ipTypeENIMultiIP, Resources: []resource{{Type: resourceENIIP,
			ID: macENIs + "." + ipPod.String(), ENIID: "eni-s", ENIMAC: macENIs, IPv4: ipPod.String()}}}}}
	pool := &poolView{enis: map[string]bool{"eni-s": true}, addrs: map[netip.Addr]poolAddr{
		addr("192.168.0.20"): {ENIID: "eni-s", State: "idle"},
		ipPod:                {ENIID: "eni-s", State: "inuse", Owner: "ns/a"},
		addr("192.168.0.22"): {ENIID: "eni-s", State: "idle"},
		addr("192.168.0.23"): {ENIID: "eni-s", State: "idle"},
	}}
	return &snapshot{mode: mode.ENIMultiIP, vethPrefix: DefaultVethPrefix, now: t0, world: w, kube: k,
		nodes: []*nodeSnap{{in: NodeInput{Name: "node-1", InstanceID: "i-1"}, store: st, pool: pool, net: baseNet()}}}
}

// baseNet is node-1's namespace with pod ns/a's PolicyRoute datapath.
func baseNet() *netView {
	veth := datapath.VethName(DefaultVethPrefix, "ns", "a", "eth0")
	host := netip.PrefixFrom(ipPod, 32)
	return &netView{
		links: []linkInfo{{Index: 1, Name: "lo", Type: "device"}, {Index: 2, Name: "eth0", Type: "veth", MAC: "00:16:3e:00:00:01"},
			{Index: 3, Name: "eth1", Type: "veth", MAC: macENIs}, {Index: 4, Name: veth, Type: "veth", MAC: "02:00:00:00:00:04"}},
		addrs: []addrInfo{{LinkIndex: 2, Prefix: netip.PrefixFrom(ipNode, 24)}, {LinkIndex: 3, Prefix: netip.PrefixFrom(ipNode, 32)}},
		rules: []ruleInfo{{Priority: datapath.ToPodPriority, Table: unix.RT_TABLE_MAIN, Dst: host},
			{Priority: datapath.FromPodPriority, Table: 1003, Src: host, Iif: veth}, {Priority: 32766, Table: unix.RT_TABLE_MAIN}},
		routes: []routeInfo{{Table: unix.RT_TABLE_MAIN, LinkIndex: 4, Type: unix.RTN_UNICAST, Dst: host},
			{Table: 1003, LinkIndex: 3, Type: unix.RTN_UNICAST, Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: addr("192.168.0.253")},
			{Table: unix.RT_TABLE_LOCAL, LinkIndex: 2, Type: unix.RTN_LOCAL, Dst: netip.PrefixFrom(ipNode, 32)}},
		neighbours: []neighInfo{{LinkIndex: 2, IP: addr("192.168.0.253"), State: netlink.NUD_REACHABLE},
			{LinkIndex: 4, IP: ipPod, State: netlink.NUD_REACHABLE}},
		qdiscs: []qdiscInfo{{LinkIndex: 4, Type: "tbf"}},
	}
}

func kindsOf(r *Report) []Kind {
	var out []Kind
	for _, f := range r.Findings {
		out = append(out, f.Kind)
	}
	return out
}

func expectKinds(t *testing.T, r *Report, want ...Kind) {
	t.Helper()
	if got := kindsOf(r); !slices.Equal(got, want) {
		var b strings.Builder
		_ = r.WriteText(&b)
		t.Fatalf("kinds %v, want %v\n%s", got, want, b.String())
	}
}

func TestAnalyzeClean(t *testing.T) {
	r := analyze(baseSnapshot())
	expectKinds(t, r)
	c := r.Nodes[0].Counts
	if c.ENIs != 2 || c.IPv4 != 4 || c.Pods != 1 || c.Attachments != 1 || c.PoolIdle != 3 || c.PodVeths != 1 {
		t.Fatalf("counts %+v", c)
	}
}

func TestAnalyzeFindings(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *snapshot)
		want   []Kind
		object string // a substring of the first finding's object
	}{
		{"idle address unknown to the pool is leaked", func(s *snapshot) {
			delete(s.nodes[0].pool.addrs, addr("192.168.0.23"))
		}, []Kind{KindLeakedIP}, "192.168.0.23 on eni-s"},
		{"pool busy: unheld address in flight", func(s *snapshot) {
			delete(s.nodes[0].pool.addrs, addr("192.168.0.23"))
			s.nodes[0].pool.inflight = 1
		}, nil, ""},
		{"no pool view: idle unverified, no finding", func(s *snapshot) {
			s.nodes[0].pool = nil
		}, nil, ""},
		{"secondary address of the Primary ENI", func(s *snapshot) {
			s.nodes[0].pool = nil
			s.world.ENIs[0].IPv4 = []netip.Addr{addr("192.168.0.11")}
		}, []Kind{KindLeakedIP}, "192.168.0.11 on eni-p"},
		{"unpaired IPv6", func(s *snapshot) {
			s.world.ENIs[1].IPv6 = []netip.Addr{addr("fd00::1"), addr("fd00::2"), addr("fd00::3"), addr("fd00::4")}
		}, []Kind{KindLeakedIP}, "ipv6 on eni-s"},
		{"sticky reservation of a gone pod is fine", func(s *snapshot) {
			s.nodes[0].store.atts[0].StickyUntil = t0.Add(time.Minute)
			delete(s.kube.pods, "ns/a")
			s.nodes[0].net = nil
		}, nil, ""},
		{"expired reservation", func(s *snapshot) {
			s.nodes[0].store.atts[0].StickyUntil = t0.Add(-time.Minute)
			delete(s.kube.pods, "ns/a")
			s.nodes[0].net = nil
		}, []Kind{KindStoreOrphan}, "ns/a"},
		{"UID differs", func(s *snapshot) {
			s.kube.pods["ns/a"].UID = "u-other"
			s.nodes[0].net = nil
		}, []Kind{KindStoreOrphan}, "ns/a"},
		{"running pod without attachment", func(s *snapshot) {
			s.nodes[0].store.atts = nil
			delete(s.nodes[0].pool.addrs, ipPod)
			s.nodes[0].pool.addrs[ipPod] = poolAddr{ENIID: "eni-s", State: "idle"}
		}, []Kind{KindMissingAttachment}, "ns/a"},
		{"pod IP differs from the store's", func(s *snapshot) {
			s.kube.pods["ns/a"].Status.PodIPs = []corev1.PodIP{{IP: "192.168.0.22"}}
		}, []Kind{KindIPMismatch}, "ns/a"},
		{"store address the cloud lacks", func(s *snapshot) {
			s.world.ENIs[1].IPv4 = []netip.Addr{addr("192.168.0.22"), addr("192.168.0.23")}
		}, []Kind{KindMissingIP}, "ns/a"},
		{"pool owner unknown to the store", func(s *snapshot) {
			s.nodes[0].pool.addrs[addr("192.168.0.22")] = poolAddr{ENIID: "eni-s", State: "inuse", Owner: "ns/ghost"}
		}, []Kind{KindPoolMismatch}, "192.168.0.22"},
		{"untagged Available ENI", func(s *snapshot) {
			s.world.ENIs = append(s.world.ENIs, fakecloud.ENIView{ENIInfo: fakecloud.ENIInfo{ID: "eni-x",
				Type: fakecloud.ENITypeSecondary, VSwitchID: "vsw-1", PrimaryIP: addr("192.168.0.99")}, Status: fakecloud.ENIAvailable})
		}, []Kind{KindOrphanENI}, "eni-x"},
		{"ENI being created is not an orphan", func(s *snapshot) {
			s.world.ENIs = append(s.world.ENIs, fakecloud.ENIView{ENIInfo: fakecloud.ENIInfo{ID: "eni-x",
				Type: fakecloud.ENITypeSecondary, VSwitchID: "vsw-1"}, Status: fakecloud.ENIAvailable,
				Tags: map[string]string{cloud.TagCreator: cloud.CreatorTerway, cloud.TagInstanceID: "i-1"}})
			s.nodes[0].store.intents = []intent{{Key: "k", Kind: intentCreateENI}}
		}, nil, ""},
		{"ENI attached but unknown to the daemon", func(s *snapshot) {
			s.nodes[0].pool.enis = map[string]bool{}
			s.nodes[0].store.atts[0].Resources[0].ENIID = ""
		}, []Kind{KindUnknownENI}, "eni-s"},
		{"stale rule", func(s *snapshot) {
			s.nodes[0].net.rules = append(s.nodes[0].net.rules,
				ruleInfo{Priority: 512, Table: unix.RT_TABLE_MAIN, Dst: netip.MustParsePrefix("192.168.0.77/32")})
		}, []Kind{KindStaleRule}, "to 192.168.0.77/32"},
		{"stale route and neighbour", func(s *snapshot) {
			n := s.nodes[0].net
			n.routes = append(n.routes, routeInfo{Table: unix.RT_TABLE_MAIN, LinkIndex: 3, Type: unix.RTN_UNICAST,
				Dst: netip.MustParsePrefix("192.168.0.77/32")})
			n.neighbours = append(n.neighbours, neighInfo{LinkIndex: 3, IP: addr("192.168.0.78"), State: netlink.NUD_PERMANENT})
		}, []Kind{KindStaleNeighbour, KindStaleRoute}, "192.168.0.78"},
		{"stale veth and retired veth", func(s *snapshot) {
			n := s.nodes[0].net
			n.links = append(n.links, linkInfo{Index: 9, Name: "cali0123456789a", Type: "veth"},
				linkInfo{Index: 10, Name: "tzda", Type: "veth", Alias: datapath.RetiredAlias})
		}, []Kind{KindStaleVeth, KindStaleVeth}, "cali0123456789a"},
		{"qdisc on an ENI link", func(s *snapshot) {
			s.nodes[0].net.qdiscs = append(s.nodes[0].net.qdiscs, qdiscInfo{LinkIndex: 3, Type: "ingress"})
		}, []Kind{KindStaleTC}, "ingress on eth1"},
		{"ENI link the cloud attaches elsewhere", func(s *snapshot) {
			s.world.ENIs[1].InstanceID = "i-2"
			s.world.ENIs[1].Tags[cloud.TagInstanceID] = "i-2"
			s.nodes[0].store.atts = nil
			s.nodes[0].pool.addrs = map[netip.Addr]poolAddr{}
			s.kube.pods = map[string]*corev1.Pod{}
			n := s.nodes[0].net
			n.links, n.rules, n.routes, n.neighbours, n.qdiscs = n.links[:3], n.rules[2:], n.routes[1:], n.neighbours[:1], nil
		}, []Kind{KindStaleLink}, "eth1"},
		{"missing datapath", func(s *snapshot) {
			s.nodes[0].net.rules = s.nodes[0].net.rules[1:]
		}, []Kind{KindMissingDatapath}, "ns/a"},
		{"ENIOnly: secondary address of a pool ENI is leaked even without a pool view", func(s *snapshot) {
			s.mode, s.nodes[0].pool, s.nodes[0].net = mode.ENIOnly, nil, nil
			s.nodes[0].store.atts[0].IPType = ipTypeVPCENI
			s.nodes[0].store.atts[0].Resources[0] = resource{Type: resourceENI, ID: macENIs, ENIID: "eni-s",
				ENIMAC: macENIs, IPv4: "192.168.0.20"}
			s.kube.pods["ns/a"].Status.PodIPs = []corev1.PodIP{{IP: "192.168.0.20"}}
		}, []Kind{KindLeakedIP, KindLeakedIP, KindLeakedIP}, "192.168.0.21 on eni-s"},
		{"VPC: store address outside the node podCIDR", func(s *snapshot) {
			s.mode, s.nodes[0].net = mode.VPC, nil
			s.world.ENIs = s.world.ENIs[:1]
			s.kube.nodes["node-1"].Spec.PodCIDR = "172.20.1.0/24"
			s.kube.pods["ns/a"].Status.PodIPs = []corev1.PodIP{{IP: "172.20.2.5"}}
			s.nodes[0].pool = nil
			s.nodes[0].store.atts[0].IPType = ipTypeVPCIP
			s.nodes[0].store.atts[0].Resources[0] = resource{Type: resourceVPCIP, ID: "172.20.2.5", IPv4: "172.20.2.5"}
		}, []Kind{KindMissingIP}, "172.20.2.5"},
		{"ENI of another cluster", func(s *snapshot) {
			s.clusterID = "c-lab"
			s.world.ENIs[1].Tags[cloud.TagClusterID] = "c-old"
		}, []Kind{KindOrphanENI}, "eni-s"},
		{"providerID of another instance", func(s *snapshot) {
			s.kube.nodes["node-1"].Spec.ProviderID = "cn-hangzhou.i-9"
		}, []Kind{KindNodeMismatch}, "node-1"},
		{"duplicate address", func(s *snapshot) {
			s.kube.pods["ns/b"] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"},
				Spec:   corev1.PodSpec{NodeName: "node-9"},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ipPod.String()}}}}
			s.nodes[0].store.atts = append(s.nodes[0].store.atts, attachment{PodNamespace: "ns", PodName: "b",
				IPType: ipTypeENIMultiIP, StickyUntil: t0.Add(time.Hour), Resources: []resource{{Type: resourceENIIP,
					ID: "x", ENIID: "eni-s", IPv4: ipPod.String()}}})
		}, []Kind{KindDuplicateIP}, ipPod.String()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSnapshot()
			tc.mutate(s)
			r := analyze(s)
			expectKinds(t, r, tc.want...)
			if tc.object != "" && !strings.Contains(r.Findings[0].Object, tc.object) && !strings.Contains(r.Findings[0].Detail, tc.object) {
				t.Fatalf("first finding %+v does not name %q", r.Findings[0], tc.object)
			}
		})
	}
}

func TestAnalyzeNoPoolNotes(t *testing.T) {
	s := baseSnapshot()
	s.nodes[0].pool = nil
	r := analyze(s)
	if !r.Clean() || r.Counts.IdleUnverified != 3 || len(r.Notes) != 1 {
		t.Fatalf("clean %v, idle unverified %d, notes %q", r.Clean(), r.Counts.IdleUnverified, r.Notes)
	}
}

func TestAnalyzeSourceErrorsSkipChecks(t *testing.T) {
	s := baseSnapshot()
	s.world, s.kube = nil, nil
	s.sourceError("", SourceCloud, "fakecloud", errors.New("unreadable"))
	r := analyze(s)
	expectKinds(t, r, KindSourceError)
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "datapath not judged") {
		t.Fatalf("notes %q", r.Notes)
	}
}
