package cnicheck

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/terway-sim/terway/internal/testnetns"
	"golang.org/x/sys/unix"
)

// A daemon that is not in the node's namespace (many daemons in one test
// process) must still run the plugin where the runtime runs it.
func TestCheckRunsPluginInNodeNamespace(t *testing.T) {
	node, err := testnetns.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testnetns.Remove(node); err != nil {
			t.Errorf("remove node netns: %v", err)
		}
	})
	var st unix.Stat_t
	if err := unix.Stat(node.Path(), &st); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("net:[%d]", st.Ino)
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if want == own {
		t.Fatalf("test namespace %s is the test's own", want)
	}

	f := newFixture(t)
	f.writeConf("10-net.conflist", f.conflist("terway", "1.0.0", ""))
	tgt := f.target("c1")
	f.add("terway", tgt, nil)
	c := New(Options{ConfDir: f.confDir, BinDirs: []string{pluginBinDir}, CacheDir: f.cacheDir, NetNS: node.Path()})
	if err := c.Check(context.Background(), tgt); err != nil {
		t.Fatalf("Check: %v", err)
	}
	checks := f.calls("CHECK", "c1")
	if len(checks) != 1 || checks[0].HostNetNS != want {
		t.Fatalf("CHECK ran in %+v, want one run in %s", checks, want)
	}
	// Without NetNS the plugin runs in the caller's namespace.
	if adds := f.calls("ADD", "c1"); len(adds) != 1 || adds[0].HostNetNS != own {
		t.Fatalf("ADD ran in %+v, want %s", adds, own)
	}
}
