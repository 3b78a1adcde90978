package fabric

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/internal/testwait"
)

// crashingFabric is the test binary run as a child (crashEnv=name,dir): a
// fabric with the default world that says "ready" and waits to be killed.
func crashingFabric(v string) int {
	name, dir, _ := strings.Cut(v, ",")
	f, err := NewFabric(FabricOptions{Name: name, NetNSDir: dir, Logger: testLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 2
	}
	c, err := fakecloud.New(fakecloud.Options{Seed: 3, TimeScale: 0.02, Hypervisor: f})
	if err == nil {
		err = f.Serve(c.MetadataBySourceHandler(), c)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = c.WaitHypervisor(ctx)
		cancel()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 2
	}
	fmt.Println("ready")
	select {}
}

// startCrashingFabric runs crashingFabric in a child process and returns
// it once the fabric and its nodes exist.
func startCrashingFabric(t *testing.T, name, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+name+","+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start crash child: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("child said %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("crash child: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("crash child not ready after 60s")
	}
	return cmd
}

// witness holds veth pairs from a namespace of the test into namespaces
// under test: when such a namespace really ends (no mount, no descriptor,
// no socket keeps it), the kernel deletes the pair and the witness end
// disappears.
type witness struct {
	h     *nlsafe.Handle
	names []string
}

func newWitness(t *testing.T) *witness {
	t.Helper()
	path := filepath.Join(t.TempDir(), "witness")
	if err := createNetNS(path); err != nil {
		t.Fatal(err)
	}
	w := &witness{h: testnetns.Handle(t, path)}
	t.Cleanup(func() {
		w.h.Close()
		if err := removeNetNS(path); err != nil {
			t.Error(err)
		}
	})
	return w
}

// watch links the witness to the namespace at path.
func (w *witness) watch(t *testing.T, path string) {
	t.Helper()
	target, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = target.Close() }()
	name := fmt.Sprintf("w%d", len(w.names))
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "witness", PeerNamespace: netlink.NsFd(target)}
	if err := w.h.LinkAdd(veth); err != nil {
		t.Fatalf("witness veth into %s: %v", path, err)
	}
	w.names = append(w.names, name)
}

// gone waits until every watched namespace has ended.
func (w *witness) gone(t *testing.T) {
	t.Helper()
	testwait.For(t, settleWithin, "watched namespaces end", func() error {
		var alive []string
		for _, n := range w.names {
			if _, err := w.h.LinkByName(n); err == nil {
				alive = append(alive, n)
			}
		}
		if len(alive) > 0 {
			return fmt.Errorf("witness links still there: %v", alive)
		}
		return nil
	})
}

// mountsUnder lists mount points below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// fabricGoroutines are goroutines of a fabric (its watcher, listeners and
// the netlink subscription it started).
func fabricGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "lab.(*Fabric)") || strings.Contains(g, "netlink.linkSubscribeAt") {
			out = append(out, g)
		}
	}
	return out
}

// Close removes every namespace, mount, goroutine and socket of the
// fabric: the namespaces really end.
func TestCloseLeavesNothing(t *testing.T) {
	// Not parallel: counts every fabric goroutine of the process.
	l := newLab(t)
	l.attachENI(node1, vsw1, 1, 0)
	// A kept-alive connection from a node to the fabric's listener.
	if id := metadataGet(t, l.node(node1), l.f, "instance-id"); id != node1 {
		t.Fatalf("instance-id %q", id)
	}
	w := newWitness(t)
	w.watch(t, l.f.NetNSPath())
	for _, n := range l.f.Nodes() {
		w.watch(t, n.NetNSPath())
	}
	if len(fabricGoroutines()) == 0 {
		t.Fatal("no fabric goroutines while running: the check below would prove nothing")
	}
	if err := l.cloud.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if left, _ := os.ReadDir(l.dir); len(left) != 0 {
		t.Fatalf("files left in the netns dir: %v", left)
	}
	if m := mountsUnder(t, l.dir); len(m) != 0 {
		t.Fatalf("mounts left: %v", m)
	}
	w.gone(t)
	testwait.For(t, settleWithin, "fabric goroutines end", func() error {
		if g := fabricGoroutines(); len(g) > 0 {
			return fmt.Errorf("%d left, first:\n%s", len(g), g[0])
		}
		return nil
	})
	l.f.mu.Lock()
	n, p, b := len(l.f.nodes), len(l.f.ports), len(l.f.bridges)
	l.f.mu.Unlock()
	if n+p+b != 0 {
		t.Fatalf("fabric still tracks %d nodes, %d ports, %d bridges", n, p, b)
	}
	if err := l.f.InstanceStarted(context.Background(), fakecloud.InstanceInfo{ID: node1}); !errors.Is(err, errClosed) {
		t.Fatalf("hook call after Close: %v", err)
	}
}

// A fabric whose process was killed leaves namespaces behind; Cleanup
// removes them (refusing while the fabric lives), and a new fabric of the
// same name starts over after a crash by itself.
func TestCleanupAfterCrash(t *testing.T) {
	testnetns.RequireRoot(t)
	dir := t.TempDir()
	name := randomName(t)
	child := startCrashingFabric(t, name, dir)
	files, _ := filepath.Glob(filepath.Join(dir, name+".*"))
	if len(files) != 5 { // fabric, internet, 3 nodes
		t.Fatalf("crashing fabric's files: %v", files)
	}
	w := newWitness(t)
	for _, f := range files {
		w.watch(t, f)
	}
	if err := Cleanup(name, dir); !errors.Is(err, ErrInUse) {
		t.Fatalf("Cleanup of a live fabric: %v, want ErrInUse", err)
	}
	if _, err := NewFabric(FabricOptions{Name: name, NetNSDir: dir}); !errors.Is(err, ErrInUse) {
		t.Fatalf("NewFabric with a live fabric's name: %v, want ErrInUse", err)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if left, _ := filepath.Glob(filepath.Join(dir, name+".*")); len(left) != len(files) || len(mountsUnder(t, dir)) != len(files) {
		t.Fatalf("after the kill: files %v, mounts %v; want the crash's leftovers", left, mountsUnder(t, dir))
	}
	if err := Cleanup(name, dir); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("files left after Cleanup: %v", left)
	}
	if m := mountsUnder(t, dir); len(m) != 0 {
		t.Fatalf("mounts left after Cleanup: %v", m)
	}
	w.gone(t)
	if err := Cleanup(name, dir); err != nil {
		t.Fatalf("Cleanup with nothing left: %v", err)
	}

	// Crash again, then start over with the same name without Cleanup.
	child = startCrashingFabric(t, name, dir)
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	l := newLabAt(t, name, dir)
	if id := metadataGet(t, l.node(node3), l.f, "instance-id"); id != node3 {
		t.Fatalf("new fabric after crash: instance-id %q", id)
	}
}
