package cni

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/rpc"
)

// gcArgs is a GC invocation with valid as cni.dev/valid-attachments.
func (e *env) gcArgs(valid []types.GCAttachment) *skel.CmdArgs {
	v, _ := json.Marshal(valid)
	conf := e.conf("1.1.0", fmt.Sprintf(`,"cni.dev/valid-attachments":%s,"cni.dev/attachments":%s`, v, v))
	return &skel.CmdArgs{Path: "/nonexistent", StdinData: conf}
}

// TestGC: GC removes exactly the attachments missing from the valid list
// (their host side and state file) and hands the valid list to the
// daemon's GarbageCollect; with the daemon down it still cleans the host
// and answers code 11.
func TestGC(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ips := map[string]string{"gc-a": "192.168.1.71", "gc-b": "192.168.1.72", "gc-c": "192.168.1.73", "gc-d": "192.168.1.74"}
	e.daemon.fixedAlloc(rpc.IPType_TypeENIMultiIP, func(r *rpc.AllocIPRequest) *rpc.NetConf {
		return eniNetConf(ips[r.K8SPodName], e.node.eniMAC)
	})
	conf := e.conf("1.1.0", "")
	pods := map[string]*pod{}
	veths := map[string]string{}
	for _, name := range []string{"gc-a", "gc-b", "gc-c"} {
		p := e.newPod(name)
		e.add(p, conf)
		pods[name] = p
		veths[name] = hostVethName(linkPrefix, PodID{Namespace: "default", Name: name}, "eth0")
	}
	valid := []types.GCAttachment{{ContainerID: pods["gc-a"].cid, IfName: "eth0"}}
	if _, err := e.run("GC", e.gcArgs(valid)); err != nil {
		t.Fatalf("GC: %v", err)
	}
	for name, p := range pods {
		_, err := os.Stat(filepath.Join(e.stateDir, p.cid+"-eth0.json"))
		kept := name == "gc-a"
		if kept != (err == nil) {
			t.Errorf("%s: state file present %v, want %v", name, err == nil, kept)
		}
		if linkExists(t, e.node.nl, veths[name]) != kept {
			t.Errorf("%s: host veth present %v, want %v", name, !kept, kept)
		}
		if m := mentions(e.node.state(t), ips[name]); (len(m) > 0) != kept {
			t.Errorf("%s: node mentions %s: %v", name, ips[name], m)
		}
	}
	_, _, _, gcs := e.daemon.snapshot()
	if len(gcs) != 1 || len(gcs[0].ValidAttachments) != 1 ||
		gcs[0].ValidAttachments[0].ContainerID != pods["gc-a"].cid || gcs[0].ValidAttachments[0].IfName != "eth0" {
		t.Errorf("GarbageCollect requests %v", gcs)
	}

	// The daemon down: the host is cleaned all the same, then code 11.
	d := e.newPod("gc-d")
	e.add(d, conf)
	e.daemon.stop()
	_, err := e.run("GC", e.gcArgs(valid))
	if err == nil || cniCode(t, err) != types.ErrTryAgainLater || !strings.Contains(err.Error(), e.daemon.socket) {
		t.Errorf("GC with the daemon down: %v, want code 11 naming the socket", err)
	}
	if _, err := os.Stat(filepath.Join(e.stateDir, d.cid+"-eth0.json")); !os.IsNotExist(err) {
		t.Errorf("gc-d state file after GC: %v", err)
	}
	if linkExists(t, e.node.nl, hostVethName(linkPrefix, PodID{Namespace: "default", Name: "gc-d"}, "eth0")) {
		t.Error("gc-d host veth left by GC with the daemon down")
	}
	if !linkExists(t, e.node.nl, veths["gc-a"]) {
		t.Error("GC removed the valid attachment gc-a")
	}
	e.del(pods["gc-a"], conf, pods["gc-a"].ns.Path())
}

// TestGCDaemonAnswers: an older daemon without GarbageCollect is not an
// error; a failing one is, after the host was cleaned.
func TestGCDaemonAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon.set(func(f *fakeDaemon) { f.gcErr = status.Error(codes.Unimplemented, "unknown method") })
	if _, err := e.run("GC", e.gcArgs(nil)); err != nil {
		t.Errorf("GC against a daemon without GarbageCollect: %v", err)
	}
	e.daemon.set(func(f *fakeDaemon) { f.gcErr = status.Error(codes.Internal, "store broken") })
	if _, err := e.run("GC", e.gcArgs(nil)); err == nil || !strings.Contains(err.Error(), "store broken") {
		t.Errorf("GC against a failing daemon: %v", err)
	}
}

// TestStatus: ready → success; not ready → 50 with the daemon's reason;
// unreachable → 50 naming the socket; exhausted but ready (the operator
// did not opt in) → success; an older daemon without Status → success.
func TestStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	args := &skel.CmdArgs{Path: "/nonexistent", StdinData: e.conf("1.1.0", "")}
	tests := []struct {
		name   string
		reply  func() (*rpc.StatusReply, error)
		code   uint // 0: success
		msgHas string
	}{
		{"ready", func() (*rpc.StatusReply, error) { return &rpc.StatusReply{Ready: true, Capacity: 10}, nil }, 0, ""},
		{"exhausted but ready", func() (*rpc.StatusReply, error) { return &rpc.StatusReply{Ready: true, Exhausted: true}, nil }, 0, ""},
		{"not ready", func() (*rpc.StatusReply, error) {
			return &rpc.StatusReply{Ready: false, Exhausted: true, Reason: "no pod address can be allocated"}, nil
		}, types.ErrPluginNotAvailable, "no pod address can be allocated"},
		{"old daemon", func() (*rpc.StatusReply, error) {
			return nil, status.Error(codes.Unimplemented, "unknown method Status")
		}, 0, ""},
		{"daemon error", func() (*rpc.StatusReply, error) { return nil, status.Error(codes.Internal, "broken") }, types.ErrPluginNotAvailable, "broken"},
	}
	for _, tc := range tests {
		e.daemon.set(func(f *fakeDaemon) { f.status = tc.reply })
		_, err := e.run("STATUS", args)
		switch {
		case tc.code == 0 && err != nil:
			t.Errorf("%s: STATUS %v, want success", tc.name, err)
		case tc.code != 0 && (err == nil || cniCode(t, err) != tc.code || !strings.Contains(err.Error(), tc.msgHas)):
			t.Errorf("%s: STATUS %v, want code %d containing %q", tc.name, err, tc.code, tc.msgHas)
		}
	}
	e.daemon.stop()
	_, err := e.run("STATUS", args)
	if err == nil || cniCode(t, err) != types.ErrPluginNotAvailable || !strings.Contains(err.Error(), e.daemon.socket) {
		t.Errorf("STATUS with the daemon down: %v, want code 50 naming the socket", err)
	}
}

// TestSameContainerSerialised: invocations for one container never
// overlap at the daemon; those for different containers do.
func TestSameContainerSerialised(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon.set(func(f *fakeDaemon) { f.delay = 100 * time.Millisecond })
	conf := e.conf("1.1.0", "")
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for i := range 12 {
		cid := "same"
		if i >= 6 {
			cid = fmt.Sprintf("other-%d", i)
		}
		wg.Go(func() {
			p := &pod{name: "p-" + cid, cid: cid, ifName: "eth0"}
			_, err := e.run("DEL", p.args(conf))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("DEL: %v", err)
		}
	}
	e.daemon.mu.Lock()
	defer e.daemon.mu.Unlock()
	if e.daemon.maxPerCID["same"] != 1 {
		t.Errorf("%d concurrent daemon calls for one container, want 1", e.daemon.maxPerCID["same"])
	}
	if e.daemon.maxInflight < 2 {
		t.Errorf("at most %d concurrent daemon calls across containers, want overlap", e.daemon.maxInflight)
	}
	if n := len(e.daemon.releases); n != 12 {
		t.Errorf("%d ReleaseIP calls, want 12", n)
	}
}

// TestParallelAdds: ADDs of different pods run their daemon calls in
// parallel (outside the node-wide datapath lock), all succeed with their
// own address, and all DELs leave the node clean.
func TestParallelAdds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 8
	e.daemon.set(func(f *fakeDaemon) { f.delay = 200 * time.Millisecond })
	e.daemon.fixedAlloc(rpc.IPType_TypeENIMultiIP, func(r *rpc.AllocIPRequest) *rpc.NetConf {
		var i int
		_, _ = fmt.Sscanf(r.K8SPodName, "par-%d", &i)
		return eniNetConf(fmt.Sprintf("192.168.1.%d", 100+i), e.node.eniMAC)
	})
	conf := e.conf("1.1.0", "")
	pods := make([]*pod, n)
	for i := range pods {
		pods[i] = e.newPod(fmt.Sprintf("par-%d", i))
	}
	// Warm the ENI's shared state so the node comparison below is exact.
	warm := e.newPod("par-99")
	e.add(warm, conf)
	before := e.node.state(t)
	results := make([][]string, n)
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			out, err := e.run("ADD", p.args(conf))
			if err != nil {
				t.Errorf("ADD %s: %v", p.name, err)
				return
			}
			var r struct {
				IPs []struct {
					Address string `json:"address"`
				} `json:"ips"`
			}
			if err := json.Unmarshal(out, &r); err != nil {
				t.Errorf("ADD %s result %s: %v", p.name, out, err)
			}
			for _, ip := range r.IPs {
				results[i] = append(results[i], ip.Address)
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, r := range results {
		want := fmt.Sprintf("192.168.1.%d/32", 100+i)
		if !slices.Equal(r, []string{want}) {
			t.Errorf("pod %d result IPs %v, want [%s]", i, r, want)
		}
		for _, a := range r {
			if seen[a] {
				t.Errorf("address %s given twice", a)
			}
			seen[a] = true
		}
	}
	e.daemon.mu.Lock()
	overlap := e.daemon.maxInflight
	e.daemon.mu.Unlock()
	if overlap < 2 {
		t.Errorf("at most %d concurrent AllocIPs, want parallel ADDs to overlap at the daemon", overlap)
	}
	for _, p := range pods {
		wg.Go(func() {
			if _, err := e.run("DEL", p.args(conf)); err != nil {
				t.Errorf("DEL %s: %v", p.name, err)
			}
		})
	}
	wg.Wait()
	after := e.node.state(t)
	if d := append(diff(before, after), diff(after, before)...); len(d) > 0 {
		t.Errorf("node differs after ADD+DEL of %d pods:\n%s", n, strings.Join(d, "\n"))
	}
	e.del(warm, conf, warm.ns.Path())
}
