package cni

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/rpc"
)

// newUTSNS creates a private UTS namespace bind-mounted on a file in a
// temp dir, removed at test end: a namespace file of another kind than
// network, as a runtime could wrongly pass in CNI_NETNS. The thread that
// made it is never given back to the Go scheduler (it ends with its
// goroutine), so no other goroutine runs in that namespace.
func newUTSNS(t *testing.T) string {
	t.Helper()
	testnetns.RequireRoot(t)
	path := filepath.Join(t.TempDir(), "uts")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
			errc <- fmt.Errorf("unshare UTS: %w", err)
			return
		}
		src := fmt.Sprintf("/proc/%d/task/%d/ns/uts", os.Getpid(), unix.Gettid())
		if err := unix.Mount(src, path, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind %s on %s: %w", src, path, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// Registered after TempDir's cleanup, so it runs before it.
	t.Cleanup(func() {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount UTS namespace %s: %v", path, err)
		}
	})
	return path
}

// TestAddRejectsNamespaceOfOtherKind: an ADD whose CNI_NETNS is a UTS
// namespace file (or a regular file) fails with code 8 (invalid netns)
// naming the path, before it asks the daemon for an address or writes
// anything into the state dir (the daemon and the node stay untouched).
func TestAddRejectsNamespaceOfOtherKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		path   func(t *testing.T) string
		msgHas string
	}{
		{"UTS namespace", newUTSNS, "is not a network namespace (it is a uts namespace)"},
		{"regular file", func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "netns")
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}, "is not a network namespace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			multiIP(e, "192.168.1.80")
			path := tc.path(t)
			before := e.node.state(t)
			p := &pod{name: "uts", cid: "cid-uts-" + randomTag(t), ifName: "eth0"}
			args := p.args(e.conf("1.1.0", ""))
			args.Netns = path
			_, err := e.run("ADD", args)
			if err == nil {
				t.Fatalf("ADD into %s succeeded", tc.name)
			}
			if c := cniCode(t, err); c != types.ErrInvalidNetNS || !strings.Contains(err.Error(), "CNI_NETNS "+path) ||
				!strings.Contains(err.Error(), tc.msgHas) {
				t.Errorf("ADD into %s: code %d %q, want %d naming CNI_NETNS %s and %q", tc.name, c, err, types.ErrInvalidNetNS, path, tc.msgHas)
			}
			if ents, err := os.ReadDir(e.stateDir); err == nil && len(ents) > 0 {
				var names []string
				for _, d := range ents {
					names = append(names, d.Name())
				}
				t.Errorf("state dir after the refused ADD: %v", names)
			}
			if allocs, releases, _, _ := e.daemon.snapshot(); len(allocs) != 0 || len(releases) != 0 {
				t.Errorf("daemon asked by a refused ADD: AllocIP %v, ReleaseIP %v", allocs, releases)
			}
			if extra := diff(e.node.state(t), before); len(extra) > 0 {
				t.Errorf("node changed by the refused ADD:\n%s", strings.Join(extra, "\n"))
			}
		})
	}
}

// TestLeftoverRecordOfOtherNamespaceKind: records that older versions left
// behind for an ADD into a UTS namespace file (the state file written,
// Setup failed on it, the rollback's teardown too) are removed by DEL,
// with CNI_NETNS the same file or empty, and by GC: the node side is torn
// down, DEL releases the address, and the state file goes.
func TestLeftoverRecordOfOtherNamespaceKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		kc    kindCase
		verb  string
		netns string // "uts" or ""
	}{
		{"PolicyRoute/DEL", kindCases[0].withIP("192.168.1.81"), "DEL", "uts"},
		{"PolicyRoute/DEL without netns", kindCases[0].withIP("192.168.1.82"), "DEL", ""},
		{"PolicyRoute/GC", kindCases[0].withIP("192.168.1.83"), "GC", ""},
		{"ExclusiveENI/DEL", kindCases[1].withIP("192.168.1.84"), "DEL", "uts"},
		{"ExclusiveENI/DEL without netns", kindCases[1].withIP("192.168.1.85"), "DEL", ""},
		{"ExclusiveENI/GC", kindCases[1].withIP("192.168.1.86"), "GC", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			uts := newUTSNS(t)
			before := e.node.state(t)
			p := &pod{name: "uts-left", cid: "cid-uts-left-" + randomTag(t), ifName: "eth0"}
			att := e.leftoverRecord(p, tc.kc, uts)

			switch tc.verb {
			case "DEL":
				args := p.args(e.conf("1.1.0", ""))
				args.Netns = ""
				if tc.netns == "uts" {
					args.Netns = uts
				}
				if _, err := e.run("DEL", args); err != nil {
					t.Fatalf("DEL of the leftover record: %v", err)
				}
				_, releases, _, _ := e.daemon.snapshot()
				if len(releases) != 1 || releases[0].K8SPodInfraContainerId != p.cid || releases[0].GetIPv4Addr().GetIPv4() != tc.kc.ip {
					t.Errorf("ReleaseIP calls %v, want one for %s", releases, tc.kc.ip)
				}
			case "GC":
				if _, err := e.run("GC", e.gcArgs(nil)); err != nil {
					t.Fatalf("GC of the leftover record: %v", err)
				}
			}
			if _, err := os.Stat(filepath.Join(e.stateDir, p.cid+"-eth0.json")); !os.IsNotExist(err) {
				t.Errorf("state file after %s: %v", tc.verb, err)
			}
			if tc.kc.kind == datapath.ExclusiveENI && !linkExists(t, e.node.nl, e.node.eniName) {
				t.Errorf("ENI %s gone from the node", e.node.eniName)
			}
			if tc.kc.kind != datapath.ExclusiveENI && linkExists(t, e.node.nl, att.Spec.HostVeth) {
				t.Errorf("host veth %s left", att.Spec.HostVeth)
			}
			e.wantNodeRestored(before, tc.kc)
			// Once more: nothing left, still no error.
			if tc.verb == "DEL" {
				e.del(p, e.conf("1.1.0", ""), "")
			}
		})
	}
}

// leftoverRecord makes what an older plugin left after an ADD into the
// UTS namespace file uts: the state file naming it, and the node side of
// the datapath (PolicyRoute's host veth, rules and routes, built here in
// a scratch pod namespace that is then removed; an exclusive ENI never
// left the node). It also tells the daemon to answer AllocIP for p.
func (e *env) leftoverRecord(p *pod, kc kindCase, uts string) *attachment {
	e.t.Helper()
	var nc *rpc.NetConf
	if kc.ipType == rpc.IPType_TypeVPCIP {
		nc = vpcNetConf(kc.ip)
	} else {
		nc = eniNetConf(kc.ip, e.node.eniMAC)
	}
	e.daemon.fixedAlloc(kc.ipType, func(*rpc.AllocIPRequest) *rpc.NetConf { return nc })
	spec, err := BuildSpec(SpecInput{Config: mustConfig(e.t, e.conf("1.1.0", "")), Kind: kc.kind, NetConf: nc,
		Pod:       PodID{Namespace: "default", Name: p.name, InfraContainerID: p.cid},
		HostNetNS: e.node.ns.Path(), PodNetNS: uts, IfName: p.ifName})
	if err != nil {
		e.t.Fatal(err)
	}
	if kc.kind != datapath.ExclusiveENI {
		scratch := testnetns.ForTest(e.t)
		built := *spec
		built.PodNetNS = scratch.Path()
		if _, err := datapath.Setup(&built); err != nil {
			e.t.Fatalf("build the leftover node side: %v", err)
		}
		spec.HostVethIndex = built.HostVethIndex
		if !linkExists(e.t, e.node.nl, spec.HostVeth) {
			e.t.Fatalf("leftover host veth %s missing", spec.HostVeth)
		}
	}
	att := &attachment{ContainerID: p.cid, IfName: p.ifName, Pod: PodID{Namespace: "default", Name: p.name, InfraContainerID: p.cid},
		IPType: kc.ipType.String(), Spec: spec}
	if err := (stateStore{dir: e.stateDir}).save(att); err != nil {
		e.t.Fatal(err)
	}
	return att
}

func mustConfig(t *testing.T, conf []byte) *Config {
	t.Helper()
	c, err := ParseConfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
