package cni

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/rpc"
)

// cniCode returns the CNI code of err.
func cniCode(t *testing.T, err error) uint {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a CNI error", err, err)
	}
	return e.Code
}

// newMultiIPPod is a new env whose daemon gives every pod ip (multiIP),
// and a new pod name in it.
func newMultiIPPod(t *testing.T, ip, name string) (*env, *pod) {
	t.Helper()
	e := newEnv(t)
	multiIP(e, ip)
	return e, e.newPod(name)
}

// multiIP makes e's daemon give every pod ip, an address of the node's
// ENI (ENIMultiIP).
func multiIP(e *env, ip string) {
	e.daemon.fixedAlloc(rpc.IPType_TypeENIMultiIP, func(*rpc.AllocIPRequest) *rpc.NetConf { return eniNetConf(ip, e.node.eniMAC) })
}

// TestAddRollback: when the datapath cannot be built (the daemon names an
// ENI the node does not have), ADD fails, releases the address with the
// rollback reason, and leaves neither state nor links behind.
func TestAddRollback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon.fixedAlloc(rpc.IPType_TypeENIMultiIP, func(*rpc.AllocIPRequest) *rpc.NetConf {
		return eniNetConf("192.168.1.30", "02:00:00:de:ad:01")
	})
	p := e.newPod("rollback")
	before := e.node.state(t)
	_, err := e.run("ADD", p.args(e.conf("1.0.0", "")))
	if err == nil {
		t.Fatal("ADD with an absent ENI succeeded")
	}
	_, releases, _, _ := e.daemon.snapshot()
	if len(releases) != 1 {
		t.Fatalf("%d ReleaseIP calls, want 1", len(releases))
	}
	r := releases[0]
	if !strings.HasPrefix(r.Reason, "roll back ip for error: ") || len(r.Reason) <= len("roll back ip for error: ") {
		t.Errorf("rollback reason %q", r.Reason)
	}
	if r.K8SPodName != p.name || r.K8SPodInfraContainerId != p.cid || r.GetIPv4Addr().GetIPv4() != "192.168.1.30" {
		t.Errorf("rollback ReleaseIP %v", r)
	}
	if _, err := os.Stat(filepath.Join(e.stateDir, p.cid+"-eth0.json")); !os.IsNotExist(err) {
		t.Errorf("state file after rollback: %v", err)
	}
	if extra := diff(e.node.state(t), before); len(extra) > 0 {
		t.Errorf("node kept after rollback:\n%s", strings.Join(extra, "\n"))
	}
	if linkExists(t, testnetns.Handle(t, p.ns.Path()), "eth0") {
		t.Error("pod has eth0 after a rolled-back ADD")
	}
}

// runPodX runs verb for pod default/x (container cid-x) with CNI_NETNS
// netns, a namespace that does not exist or none: what the daemon answers
// decides the outcome.
func (e *env) runPodX(verb, netns string) error {
	p := &pod{name: "x", cid: "cid-x", ifName: "eth0"}
	args := p.args(e.conf("1.1.0", ""))
	args.Netns = netns
	_, err := e.run(verb, args)
	return err
}

// TestAddDaemonErrors: the daemon's refusals become CNI errors the
// runtime can act on, and nothing is set up.
func TestAddDaemonErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		err    error
		code   uint
		msgHas string
	}{
		{statusErr(codesResourceExhausted, "alloc IP for default/x: no capacity"), types.ErrTryAgainLater, "no address available"},
		{statusErr(codesUnavailable, "pod default/x: already processing"), types.ErrTryAgainLater, "earlier call"},
		// The busy detail alone, its text changed: recognised by the detail.
		{busyDetailErr(codesUnavailable, "pod default/x: busy"), types.ErrTryAgainLater, "earlier call"},
		{statusErr(codesInternal, "disk on fire"), types.ErrInternal, "disk on fire"},
	}
	for _, tc := range tests {
		e.daemon.set(func(f *fakeDaemon) {
			f.alloc = func(*rpc.AllocIPRequest) (*rpc.AllocIPReply, error) { return nil, tc.err }
		})
		err := e.runPodX("ADD", "/nonexistent/netns")
		if err == nil {
			t.Fatalf("ADD succeeded with daemon error %v", tc.err)
		}
		if c := cniCode(t, err); c != tc.code || !strings.Contains(err.Error(), tc.msgHas) {
			t.Errorf("daemon %v: CNI code %d %q, want %d containing %q", tc.err, c, err, tc.code, tc.msgHas)
		}
	}
	if _, releases, _, _ := e.daemon.snapshot(); len(releases) != 0 {
		t.Errorf("ReleaseIP after a refused AllocIP: %v", releases)
	}
}

// TestIPVlanFallback: IPVlan pods on a kernel without ipvlan get
// PolicyRoute and a Warning pod event VirtualModeChanged saying why, with
// the probe forced to report missing and with this machine's real probe
// (on a kernel that has ipvlan there is no fallback: lab/e2e's IPVlan
// case, run by make test-kernel, covers that).
func TestIPVlanFallback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		probe  func(string) error
		msgHas []string
	}{
		{"forced missing", func(string) error { return errors.Join(errTestNoIPVlan, datapath.ErrIPVlanUnsupported) },
			[]string{"kernel lacks ipvlan", "Veth"}},
		{"real probe", datapath.ProbeIPVlan, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if tc.name == "real probe" {
				if err := datapath.ProbeIPVlan(e.node.ns.Path()); err == nil {
					t.Skip("this kernel has ipvlan: nothing to fall back from (make test-kernel proves the IPVlan datapath)")
				}
			}
			e.probe = tc.probe
			multiIP(e, "192.168.1.40")
			p := e.newPod("ipvlan")
			conf := e.conf("1.1.0", `,"eniip_virtual_type":"ipvlan"`)
			e.add(p, conf)
			e.wantState(p, datapath.PolicyRoute)
			_, _, events, _ := e.daemon.snapshot()
			if len(events) != 1 {
				t.Fatalf("%d events, want 1: %v", len(events), events)
			}
			ev := events[0]
			if ev.Reason != "VirtualModeChanged" || ev.EventType != rpc.EventType_EventTypeWarning ||
				ev.EventTarget != rpc.EventTarget_EventTargetPod || ev.K8SPodName != p.name || ev.K8SPodNamespace != "default" {
				t.Errorf("event %v", ev)
			}
			for _, s := range tc.msgHas {
				if !strings.Contains(ev.Message, s) {
					t.Errorf("event message %q lacks %q", ev.Message, s)
				}
			}
			if tc.msgHas == nil && !strings.Contains(ev.Message, "lacks ipvlan") {
				t.Errorf("event message %q gives no reason", ev.Message)
			}
			e.del(p, conf, p.ns.Path())
		})
	}
}

// TestDelVariants: DEL without netns, DEL with the daemon down (from the
// state file), DEL without state (from the daemon's record, and with the
// daemon down from prevResult) all clean the node.
func TestDelVariants(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		noNetns     bool
		dropState   bool
		daemonDown  bool
		wantRelease int
	}{
		{name: "without netns", noNetns: true, wantRelease: 1},
		{name: "daemon down", daemonDown: true},
		{name: "no state, daemon record", dropState: true, wantRelease: 1},
		{name: "no state, daemon down, prevResult", dropState: true, daemonDown: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, p := newMultiIPPod(t, "192.168.1.50", "del")
			conf := e.conf("1.0.0", "")
			before := e.node.state(t)
			_, out := e.add(p, conf)
			att := e.wantState(p, datapath.PolicyRoute)
			if tc.dropState {
				if err := os.Remove(filepath.Join(e.stateDir, p.cid+"-eth0.json")); err != nil {
					t.Fatal(err)
				}
			}
			if tc.daemonDown {
				e.daemon.stop()
			}
			netnsPath := p.ns.Path()
			if tc.noNetns {
				netnsPath = ""
			}
			e.del(p, withPrev(conf, out), netnsPath)
			if linkExists(t, e.node.nl, att.Spec.HostVeth) {
				t.Errorf("host veth %s left", att.Spec.HostVeth)
			}
			e.wantNodeRestored(before, kindCases[0].withIP("192.168.1.50"))
			if _, releases, _, _ := e.daemon.snapshot(); len(releases) != tc.wantRelease {
				t.Errorf("%d ReleaseIP calls, want %d", len(releases), tc.wantRelease)
			}
			// And once more: DEL stays idempotent.
			e.del(p, withPrev(conf, out), "")
		})
	}
}

func (kc kindCase) withIP(ip string) kindCase {
	kc.ip = ip
	return kc
}

// TestDelDaemonAnswers: a busy or slow daemon does not fail DEL; a broken
// one does, so the runtime retries.
func TestDelDaemonAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		err  error
		fail bool
	}{
		{statusErr(codesUnavailable, "pod default/x: already processing"), false},
		// The busy detail alone, under a code DEL would otherwise fail on.
		{busyDetailErr(codesInternal, "pod default/x: busy"), false},
		{statusErr(codesDeadlineExceeded, "slow"), false},
		{statusErr(codesInternal, "store broken"), true},
	}
	for _, tc := range tests {
		e.daemon.set(func(f *fakeDaemon) { f.release = func(*rpc.ReleaseIPRequest) error { return tc.err } })
		err := e.runPodX("DEL", "")
		if (err != nil) != tc.fail {
			t.Errorf("ReleaseIP answering %v: DEL error %v, want failure %v", tc.err, err, tc.fail)
		}
	}
}

// TestCheck: CHECK passes on a good pod and names what is wrong
// otherwise: a deleted host object, a prevResult with another address,
// the daemon giving the pod another address or none.
func TestCheck(t *testing.T) {
	t.Parallel()
	e, p := newMultiIPPod(t, "192.168.1.60", "check")
	conf := e.conf("1.1.0", "")
	_, out := e.add(p, conf)
	att := e.wantState(p, datapath.PolicyRoute)
	check := func(prev []byte) error {
		_, err := e.run("CHECK", p.args(withPrev(conf, prev)))
		return err
	}
	if err := check(out); err != nil {
		t.Fatalf("CHECK of a good pod: %v", err)
	}
	wrongPrev := []byte(strings.Replace(string(out), "192.168.1.60", "192.168.1.61", 1))
	if err := check(wrongPrev); err == nil || !strings.Contains(err.Error(), "192.168.1.61") {
		t.Errorf("CHECK with prevResult of another address: %v", err)
	}
	e.daemon.set(func(f *fakeDaemon) {
		f.info = func(*rpc.GetInfoRequest) (*rpc.GetInfoReply, error) {
			return &rpc.GetInfoReply{Success: true, IPType: rpc.IPType_TypeENIMultiIP,
				NetConfs: []*rpc.NetConf{eniNetConf("192.168.1.99", e.node.eniMAC)}}, nil
		}
	})
	if err := check(out); err == nil || !strings.Contains(err.Error(), "192.168.1.99") {
		t.Errorf("CHECK with the daemon disagreeing: %v", err)
	}
	e.daemon.set(func(f *fakeDaemon) {
		f.info = func(*rpc.GetInfoRequest) (*rpc.GetInfoReply, error) { return &rpc.GetInfoReply{}, nil }
	})
	if err := check(out); err == nil || cniCode(t, err) != types.ErrUnknownContainer {
		t.Errorf("CHECK with the daemon holding nothing: %v", err)
	}
	e.daemon.set(func(f *fakeDaemon) { f.info = nil })
	e.daemon.stop() // the daemon's view is optional: CHECK goes on without it
	if err := check(out); err != nil {
		t.Errorf("CHECK with the daemon down: %v", err)
	}
	veth, err := e.node.nl.LinkByName(att.Spec.HostVeth)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.node.nl.LinkDel(veth); err != nil {
		t.Fatal(err)
	}
	err = check(out)
	if err == nil || !strings.Contains(err.Error(), att.Spec.HostVeth) && !strings.Contains(err.Error(), "eth0") {
		t.Errorf("CHECK after deleting the host veth: %v", err)
	}
	e.del(p, withPrev(conf, out), p.ns.Path())
	if _, err := e.run("CHECK", p.args(withPrev(conf, out))); err == nil || cniCode(t, err) != types.ErrUnknownContainer {
		t.Errorf("CHECK after DEL: %v, want code 3", err)
	}
}

// TestAddRetry: a retried ADD for the same container gets the same
// result (the daemon answers the same address, Setup is idempotent) and
// still one set of links.
func TestAddRetry(t *testing.T) {
	t.Parallel()
	for _, kc := range kindCases {
		t.Run(kc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.daemon.fixedAlloc(kc.ipType, func(*rpc.AllocIPRequest) *rpc.NetConf { return kc.nc(e) })
			p := e.newPod("retry")
			conf := e.conf("1.1.0", "")
			_, first := e.add(p, conf)
			afterFirst := e.node.state(t)
			_, second := e.add(p, conf)
			if string(first) != string(second) {
				t.Errorf("retried ADD answered\n%s\nfirst ADD\n%s", second, first)
			}
			if d := append(diff(afterFirst, e.node.state(t)), diff(e.node.state(t), afterFirst)...); len(d) > 0 {
				t.Errorf("retried ADD changed the node:\n%s", strings.Join(d, "\n"))
			}
			e.wantState(p, kc.kind)
			if _, err := e.run("CHECK", p.args(withPrev(conf, second))); err != nil {
				t.Errorf("CHECK after retried ADD: %v", err)
			}
			e.del(p, conf, p.ns.Path())
		})
	}
}

// TestAddReplacesStale: when a retried ADD gets another address, the
// earlier setup of the container is removed, not stranded.
func TestAddReplacesStale(t *testing.T) {
	t.Parallel()
	e, p := newMultiIPPod(t, "192.168.1.90", "stale")
	conf := e.conf("1.1.0", "")
	e.add(p, conf)
	multiIP(e, "192.168.1.91")
	res, _ := e.add(p, conf)
	if ips := resultIPs(t, res); len(ips) != 1 || ips[0] != "192.168.1.91" {
		t.Errorf("second ADD result %v", ips)
	}
	st := e.node.state(t)
	if m := mentions(st, "192.168.1.90"); len(m) > 0 {
		t.Errorf("node still has the first address:\n%s", strings.Join(m, "\n"))
	}
	if m := mentions(st, "192.168.1.91"); len(m) == 0 {
		t.Error("node has nothing for the second address")
	}
	e.del(p, conf, p.ns.Path())
}
