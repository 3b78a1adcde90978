package audit

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testnetns"
)

// TestAuditLab stands up a node with its daemon, one pod added by the
// real plugin and a warm pool: the audit is clean. Then, as a negative
// control, a leaked IP, a stale rule and an untagged orphan ENI are
// injected behind the daemon's back: each is reported with its kind, and
// nothing else.
func TestAuditLab(t *testing.T) {
	e := newLabEnv(t)
	podIP := e.addPod("web")
	e.waitPoolWarm()

	r := e.audit()
	if !r.Clean() {
		t.Fatalf("audit of a clean lab is not clean:\n%s", text(r))
	}
	c := r.Counts
	if c.Pods != 1 || c.Attachments != 1 || c.PodVeths != 1 || c.PoolIdle < 2 || c.ENIs < 2 || c.Rules < 2 || c.IdleUnverified != 0 {
		t.Fatalf("counts of the clean lab: %+v\n%s", c, text(r))
	}
	t.Logf("clean audit:\n%s", text(r))

	leaked := e.injectLeakedIP()
	stale := e.injectStaleRule()
	orphan := e.injectOrphanENI()
	if err := e.cloud.WaitHypervisor(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r = e.audit()
	t.Logf("audit after the injections:\n%s", text(r))
	want := []struct {
		kind   Kind
		object string
		detail string
	}{
		{KindOrphanENI, "eni " + orphan, "untagged"},
		{KindLeakedIP, "ip " + leaked.String() + " on ", "not in the daemon's pool"},
		{KindStaleRule, fmt.Sprintf(`rule 512 "to %s/32 lookup 254"`, stale), "no live pod"},
	}
	if len(r.Findings) != len(want) {
		t.Fatalf("%d findings, want %d", len(r.Findings), len(want))
	}
	for i, w := range want {
		f := r.Findings[i]
		if f.Kind != w.kind || !strings.HasPrefix(f.Object, w.object) || !strings.Contains(f.Detail, w.detail) {
			t.Errorf("finding %d: %+v, want kind %s, object %q..., detail with %q", i, f, w.kind, w.object, w.detail)
		}
	}
	if !strings.Contains(r.Findings[0].Detail, "Available") {
		t.Errorf("orphan ENI finding does not say it is Available: %+v", r.Findings[0])
	}
	if podIP == leaked || podIP == stale {
		t.Fatalf("test bug: injected address %s/%s is the pod's", leaked, stale)
	}

	// A real leak does not settle.
	r, err := RunUntilClean(ctxT(t), e.input(), 600*time.Millisecond)
	if err != nil || len(r.Findings) != len(want) {
		t.Fatalf("RunUntilClean: %v, %d findings", err, len(r.Findings))
	}
	// Each round audits the input of that round: once the node with the
	// leak is no longer the lab's, the audit is clean.
	rounds := 0
	r, err = RunUntilCleanOf(ctxT(t), func() (Input, error) {
		rounds++
		in := e.input()
		if rounds > 1 {
			in.Nodes = nil
		}
		return in, nil
	}, time.Minute)
	if err != nil || !r.Clean() || rounds != 2 {
		t.Fatalf("RunUntilCleanOf with the node gone: %v, %d rounds, %d findings", err, rounds, len(r.Findings))
	}
	// A source that cannot be read is a finding, not silence.
	in := e.input()
	in.AdminToken = "wrong"
	r, err = Run(ctxT(t), in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Clean() || r.Findings[0].Kind != KindSourceError || !strings.Contains(r.Findings[0].Detail, "401") {
		t.Fatalf("audit with a wrong admin token:\n%s", text(r))
	}
}

func (e *labEnv) audit() *Report {
	e.t.Helper()
	r, err := Run(ctxT(e.t), e.input())
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func text(r *Report) string {
	var b strings.Builder
	_ = r.WriteText(&b)
	return b.String()
}

// injectLeakedIP assigns one more address to node-1's secondary ENI
// through the ECS API, as someone other than the daemon.
func (e *labEnv) injectLeakedIP() netip.Addr {
	t := e.t
	t.Helper()
	var eniID string
	for _, v := range e.cloud.ENIs() {
		if v.InstanceID == instance1 && v.Type == fakecloud.ENITypeSecondary {
			eniID = v.ID
		}
	}
	if eniID == "" {
		t.Fatal("node-1 has no secondary ENI")
	}
	req := ecs.CreateAssignPrivateIpAddressesRequest()
	req.NetworkInterfaceId = eniID
	req.SecondaryPrivateIpAddressCount = requests.NewInteger(1)
	resp, err := e.ecsClient().AssignPrivateIpAddresses(req)
	if err != nil {
		t.Fatalf("assign an address to %s: %v", eniID, err)
	}
	ips := resp.AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress
	if len(ips) != 1 {
		t.Fatalf("assigned %v", ips)
	}
	return netip.MustParseAddr(ips[0])
}

// injectStaleRule adds `512: to <ip> lookup main` in node-1's namespace
// for an address of the vSwitch no ENI holds.
func (e *labEnv) injectStaleRule() netip.Addr {
	t := e.t
	t.Helper()
	var used []netip.Addr
	for _, v := range e.cloud.ENIs() {
		used = append(append(append(used, v.PrimaryIP), v.IPv4...), v.Gateway)
	}
	ip := netip.MustParseAddr("192.168.0.200")
	for slices.Contains(used, ip) {
		ip = ip.Prev()
	}
	h := testnetns.Handle(t, e.ln.NetNSPath())
	rule := netlink.NewRule()
	rule.Priority, rule.Table, rule.Family = 512, unix.RT_TABLE_MAIN, netlink.FAMILY_V4
	rule.Dst = &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}
	if err := h.RuleAdd(rule); err != nil {
		t.Fatalf("add rule in the node: %v", err)
	}
	return ip
}

// injectOrphanENI creates an ENI without tags in the node's vSwitch.
func (e *labEnv) injectOrphanENI() string {
	t := e.t
	t.Helper()
	req := ecs.CreateCreateNetworkInterfaceRequest()
	req.VSwitchId = vswitch1
	req.SecurityGroupId = fakecloud.DefaultSecurityGroup
	resp, err := e.ecsClient().CreateNetworkInterface(req)
	if err != nil {
		t.Fatalf("create an ENI: %v", err)
	}
	return resp.NetworkInterfaceId
}

// TestAuditDaemonUnreachable: the audit asks the daemon for its records
// and pool; a daemon that stopped, or was killed and left its socket
// file behind, is reported as unreachable (a source error for each), the
// checks that need it are skipped, and the other sources are still
// judged.
func TestAuditDaemonUnreachable(t *testing.T) {
	e := newLabEnv(t)
	e.addPod("web")
	e.waitPoolWarm()
	if r := e.audit(); !r.Clean() || r.Counts.Attachments != 1 {
		t.Fatalf("audit with the daemon up:\n%s", text(r))
	}
	e.stopDaemon()
	checkUnreachable(t, e.audit(), "stopped")

	// A killed daemon leaves its socket file with nobody listening.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: e.path("eni.socket"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	checkUnreachable(t, e.audit(), "killed")
}

// checkUnreachable: r has exactly the store's and the pool's source
// errors for node-1, each saying the daemon is unreachable, and still
// counted what the cloud and the node's namespace hold.
func checkUnreachable(t *testing.T, r *Report, how string) {
	t.Helper()
	t.Logf("audit with the daemon %s:\n%s", how, text(r))
	var sources []Source
	for _, f := range r.Findings {
		if f.Kind != KindSourceError || f.Node != nodeName || !strings.Contains(f.Detail, "unreachable") {
			t.Errorf("daemon %s: finding %+v", how, f)
		}
		sources = append(sources, f.Sources...)
	}
	slices.Sort(sources)
	if !slices.Equal(sources, []Source{SourcePool, SourceStore}) {
		t.Errorf("daemon %s: source errors for %v, want pool and store\n%s", how, sources, text(r))
	}
	if c := r.Counts; c.Attachments != 0 || c.PoolAddresses != 0 || c.ENIs < 2 || c.Links == 0 || c.Pods != 1 {
		t.Errorf("daemon %s: counts %+v", how, c)
	}
}
