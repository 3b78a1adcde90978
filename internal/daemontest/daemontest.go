// Package daemontest runs terway daemons in process on the nodes of a lab
// fabric, for tests that drive them through the CNI plugin the way a
// container runtime does (lab/e2e, lab/audit): a directory and a log per
// node, the daemon configured as terwayd configures it, and libcni
// running the plugin in the node's network namespace.
package daemontest

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	"k8s.io/client-go/kubernetes"

	"github.com/terway-sim/terway/daemon"
	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/dynconfig"
	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/internal/nsexec"
	"github.com/terway-sim/terway/internal/testlog"
	"github.com/terway-sim/terway/lab/fabric"
)

// setupWithin bounds loading a configuration and starting a daemon.
const setupWithin = 90 * time.Second

// Node is a lab node made ready for a daemon and a runtime.
type Node struct {
	*fabric.Node
	// Dir holds the files of the daemon and of the runtime (store,
	// socket, CNI configuration, cache and state). It is not under
	// t.TempDir: a unix socket's path must fit in 108 bytes.
	Dir string
	// Logs collects the daemon's log and the plugin's stderr; the test
	// prints them if it fails.
	Logs *testlog.Buffer
}

// NewNode readies the node of instance id in f; its directory is removed
// when t ends.
func NewNode(t testing.TB, f *fabric.Fabric, id string) *Node {
	t.Helper()
	ln, ok := f.Node(id)
	if !ok {
		t.Fatalf("no lab node for %s", id)
	}
	dir, err := os.MkdirTemp("", "node")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	n := &Node{Node: ln, Dir: dir, Logs: &testlog.Buffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon and plugin log of %s:\n%s", id, n.Logs.String())
		}
	})
	return n
}

// Path is p within the node's directory.
func (n *Node) Path(p ...string) string { return filepath.Join(append([]string{n.Dir}, p...)...) }

// Config is the configuration terwayd loads for node from eni_conf conf
// (daemon/dynconfig): a node labelled terway-config=<name> in kube has
// the eni_conf of ConfigMap kube-system/<name> merged over conf.
func Config(t testing.TB, kube kubernetes.Interface, node string, conf map[string]any) *config.Config {
	t.Helper()
	raw, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := dynconfig.Load(setupContext(t), clientset.Wrap(kube), node, raw, dynconfig.DefaultNamespace)
	if err != nil {
		t.Fatalf("configuration of %s: %v", node, err)
	}
	return cfg
}

// Start runs a daemon with o on the node until t ends or stop is called:
// in the node's network namespace, reaching the metadata service through
// the node's HTTP client, logging to Logs, its store not synced to disk
// (a test's). It returns once the daemon is ready.
func (n *Node) Start(t testing.TB, o daemon.Options) (d *daemon.Daemon, stop func()) {
	t.Helper()
	o.StoreNoSync, o.HostNetNS, o.HTTPClient = true, n.NetNSPath(), n.HTTPClient()
	o.Logger = slog.New(slog.NewTextHandler(n.Logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d, err := daemon.New(setupContext(t), o)
	if err != nil {
		t.Fatalf("daemon on %s: %v", o.NodeName, err)
	}
	served := make(chan error, 1)
	go func() { served <- d.Serve(context.Background()) }()
	<-d.Ready()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := d.Close(); err != nil {
				t.Errorf("close daemon on %s: %v", o.NodeName, err)
			}
			if err := <-served; err != nil {
				t.Errorf("serve on %s: %v", o.NodeName, err)
			}
		})
	}
	t.Cleanup(stop)
	return d, stop
}

// CNI is libcni as a runtime on the node uses it: the plugins in binDir
// run in the node's network namespace with their stderr in Logs, and
// results are cached in the node's directory.
func (n *Node) CNI(binDir string) *libcni.CNIConfig {
	exec := nsexec.Exec{Exec: &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: n.Logs}, PluginDecoder: version.PluginDecoder{}},
		Path: n.NetNSPath()}
	return libcni.NewCNIConfigWithCacheDir([]string{binDir}, n.Path("cache"), exec)
}

// setupContext bounds a setup step; it lives until t ends, as what a
// daemon starts with it may.
func setupContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), setupWithin)
	t.Cleanup(cancel)
	return ctx
}
