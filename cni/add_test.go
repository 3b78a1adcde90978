package cni

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/testutils"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/rpc"
)

// kindCase is one of the daemon's IPTypes and the datapath it must get.
type kindCase struct {
	name   string
	ipType rpc.IPType
	kind   datapath.Kind
	ip     string
	nc     func(e *env) *rpc.NetConf
}

var kindCases = []kindCase{
	{"ENIMultiIP", rpc.IPType_TypeENIMultiIP, datapath.PolicyRoute, "192.168.1.10",
		func(e *env) *rpc.NetConf { return eniNetConf("192.168.1.10", e.node.eniMAC) }},
	{"VPCENI", rpc.IPType_TypeVPCENI, datapath.ExclusiveENI, "192.168.1.20",
		func(e *env) *rpc.NetConf { return eniNetConf("192.168.1.20", e.node.eniMAC) }},
	{"VPCIP", rpc.IPType_TypeVPCIP, datapath.VPCRoute, "172.20.1.5",
		func(*env) *rpc.NetConf { return vpcNetConf("172.20.1.5") }},
}

// TestAddCheckDel runs ADD, CHECK, DEL and DEL again (without netns, as
// containerd's second DEL) for every IPType and spec version, with the
// real datapath between a test-made node and pod namespace. It checks the
// result's version and address, the pod's interface, the state file, the
// calls to the daemon, and that the node is left as it was.
func TestAddCheckDel(t *testing.T) {
	t.Parallel()
	for _, kc := range kindCases {
		for _, v := range SupportedVersions {
			t.Run(kc.name+"/"+v, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t)
				e.daemon.fixedAlloc(kc.ipType, func(*rpc.AllocIPRequest) *rpc.NetConf { return kc.nc(e) })
				p := e.newPod("web-" + strings.ReplaceAll(v, ".", ""))
				conf := e.conf(v, "")
				before := e.node.state(t)

				res, out := e.add(p, conf)
				if ips := resultIPs(t, res); !slices.Equal(ips, []string{kc.ip}) {
					t.Errorf("result IPs %v, want [%s]", ips, kc.ip)
				}
				if got := podAddrs(t, p); !slices.Contains(got, kc.ip) {
					t.Errorf("pod %s addresses %v lack %s", p.ifName, got, kc.ip)
				}
				att := e.wantState(p, kc.kind)
				if m := mentions(e.node.state(t), kc.ip); len(m) == 0 {
					t.Errorf("node has nothing for the pod address %s after ADD", kc.ip)
				}
				if kc.kind != datapath.ExclusiveENI && !linkExists(t, e.node.nl, att.Spec.HostVeth) {
					t.Errorf("host veth %s missing after ADD", att.Spec.HostVeth)
				}
				if kc.kind == datapath.ExclusiveENI && linkExists(t, e.node.nl, e.node.eniName) {
					t.Errorf("ENI %s still in the node after ADD", e.node.eniName)
				}
				allocs, _, _, _ := e.daemon.snapshot()
				if len(allocs) != 1 || allocs[0].K8SPodName != p.name || allocs[0].K8SPodNamespace != "default" ||
					allocs[0].K8SPodInfraContainerId != p.cid || allocs[0].Netns != p.ns.Path() || allocs[0].IfName != "eth0" {
					t.Errorf("AllocIP requests %v", allocs)
				}

				if testutils.SpecVersionHasCHECK(v) {
					if _, err := e.run("CHECK", p.args(withPrev(conf, out))); err != nil {
						t.Errorf("CHECK after ADD: %v", err)
					}
				}
				delConf := conf
				if v != "0.3.1" { // prevResult on DEL came with 0.4.0
					delConf = withPrev(conf, out)
				}
				e.del(p, delConf, p.ns.Path())
				e.del(p, delConf, "")

				if _, err := os.Stat(filepath.Join(e.stateDir, p.cid+"-eth0.json")); !os.IsNotExist(err) {
					t.Errorf("state file after DEL: %v", err)
				}
				if linkExists(t, testnetns.Handle(t, p.ns.Path()), p.ifName) {
					t.Errorf("pod still has %s after DEL", p.ifName)
				}
				e.wantNodeRestored(before, kc)
				_, releases, _, _ := e.daemon.snapshot()
				if len(releases) != 2 {
					t.Fatalf("%d ReleaseIP calls, want 2 (one per DEL)", len(releases))
				}
				r := releases[0]
				if r.Reason != "normal release" || r.K8SPodName != p.name || r.K8SPodInfraContainerId != p.cid ||
					r.IPType != kc.ipType || r.GetIPv4Addr().GetIPv4() != kc.ip {
					t.Errorf("first ReleaseIP %v", r)
				}
				if releases[1].Reason != "normal release" {
					t.Errorf("second ReleaseIP reason %q", releases[1].Reason)
				}
			})
		}
	}
}

// wantState reads the state file, checks its modes and kind.
func (e *env) wantState(p *pod, kind datapath.Kind) *attachment {
	e.t.Helper()
	st, err := os.Stat(e.stateDir)
	if err != nil || st.Mode().Perm() != 0o700 {
		e.t.Errorf("state dir %s: mode %v err %v, want 0700", e.stateDir, st.Mode().Perm(), err)
	}
	path := filepath.Join(e.stateDir, p.cid+"-"+p.ifName+".json")
	st, err = os.Stat(path)
	if err != nil {
		e.t.Fatalf("state file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		e.t.Errorf("state file mode %v, want 0600", st.Mode().Perm())
	}
	att, err := stateStore{dir: e.stateDir}.load(p.cid, p.ifName)
	if err != nil {
		e.t.Fatalf("load state: %v", err)
	}
	if att.Spec.Kind != kind || att.Pod.Name != p.name || att.Spec.PodNetNS != p.ns.Path() || att.Spec.HostNetNS != e.recordedHostNS {
		e.t.Errorf("state %+v spec %+v", att, att.Spec)
	}
	if kind == datapath.ExclusiveENI && att.Spec.ENIName != e.node.eniName {
		e.t.Errorf("state ENIName %q, want %q", att.Spec.ENIName, e.node.eniName)
	}
	return att
}

// wantNodeRestored compares the node with its state before ADD: nothing
// of it removed, nothing added but the ENI state PolicyRoute shares
// between the ENI's pods (its table's routes, the node address on it).
func (e *env) wantNodeRestored(before map[string]bool, kc kindCase) {
	e.t.Helper()
	after := e.node.state(e.t)
	if gone := diff(before, after); len(gone) > 0 {
		e.t.Errorf("node lost after ADD/DEL:\n%s", strings.Join(gone, "\n"))
	}
	var extra []string
	for _, l := range diff(after, before) {
		shared := kc.kind == datapath.PolicyRoute &&
			(strings.HasPrefix(l, "addr "+e.node.eniName+" ") || (strings.HasPrefix(l, "route table 1") && strings.HasSuffix(l, "dev "+e.node.eniName)))
		if !shared {
			extra = append(extra, l)
		}
	}
	if len(extra) > 0 {
		e.t.Errorf("node kept after DEL:\n%s", strings.Join(extra, "\n"))
	}
	if m := mentions(after, kc.ip); len(m) > 0 {
		e.t.Errorf("node still refers to the pod address %s:\n%s", kc.ip, strings.Join(m, "\n"))
	}
}
