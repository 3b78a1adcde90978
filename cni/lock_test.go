package cni

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/internal/lockholder"
	"github.com/terway-sim/terway/internal/testwait"
)

// TestLockFile: the lock excludes others, a waiter gives up when its
// context ends, and a lock file removed by its holder is not shared by a
// waiter on the old file and a newcomer on the new one.
func TestLockFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	l, err := lockContainer(ctx, dir, "c1")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := lockContainer(short, dir, "c1"); err == nil {
		t.Fatal("second lock of c1 granted while held")
	}
	other, err := lockContainer(ctx, dir, "c2")
	if err != nil {
		t.Fatalf("lock of another container: %v", err)
	}
	other.unlock()

	var holders, maxHolders, started atomic.Int32
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			started.Add(1)
			w, err := lockContainer(ctx, dir, "c1")
			if err != nil {
				t.Errorf("waiter: %v", err)
				return
			}
			n := holders.Add(1)
			for {
				m := maxHolders.Load()
				if n <= m || maxHolders.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(10 * time.Millisecond)
			holders.Add(-1)
			w.unlockAndRemove() // as DEL does
		})
	}
	// Remove the file once every waiter is trying: gofrs/flock opens the
	// file anew on each attempt, so a waiter may hold the old inode or the
	// new one when it is removed, and must end up alone either way.
	path := containerLockPath(dir, "c1")
	testwait.Until(t, 10*time.Second, "6 waiters started", func() bool { return started.Load() == 6 })
	l.unlockAndRemove()
	wg.Wait()
	if maxHolders.Load() != 1 {
		t.Errorf("%d holders at once, want 1", maxHolders.Load())
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("lock file left: %v", err)
	}
}

// TestDatapathLockTimeout: the node-wide lock gives up (the caller's
// context ending first here) with an error naming the lock.
func TestDatapathLockTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	held := make(chan struct{})
	release := make(chan struct{})
	go func() {
		_ = withDatapathLock(context.Background(), dir, exclusiveENISpec, false, func() error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ran := false
	err := withDatapathLock(ctx, dir, exclusiveENISpec, false, func() error { ran = true; return nil })
	close(release)
	if err == nil || ran {
		t.Fatalf("lock taken while held: err %v ran %v", err, ran)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, "datapath.lock")) {
		t.Errorf("error %q does not name the lock", err)
	}
}

var (
	exclusiveENISpec = &datapath.Spec{Kind: datapath.ExclusiveENI}
	vethSpec         = func(veth string) *datapath.Spec { return &datapath.Spec{Kind: datapath.PolicyRoute, HostVeth: veth} }
)

// TestDatapathLocksByKind: pods of a kind that sets up concurrently run
// at once, but never two setups of one pod (its host veth); a kind that
// does not waits for all of them and they for it. A teardown removes its
// pod's lock file, a setup keeps it.
func TestDatapathLocksByKind(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	inside := make(chan string, 4)
	release := make(chan struct{})
	hold := func(spec *datapath.Spec, gone bool) chan error {
		done := make(chan error, 1)
		go func() {
			done <- withDatapathLock(ctx, dir, spec, gone, func() error { inside <- spec.HostVeth; <-release; return nil })
		}()
		return done
	}
	a, b := hold(vethSpec("vetha"), false), hold(vethSpec("vethb"), true)
	for range 2 { // both inside at once
		select {
		case <-inside:
		case <-time.After(10 * time.Second):
			t.Fatal("two pods' setups did not run at once")
		}
	}
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	if err := withDatapathLock(short(), dir, vethSpec("vetha"), false, func() error { return nil }); err == nil {
		t.Error("a second setup of pod vetha ran while the first held its lock")
	}
	if err := withDatapathLock(short(), dir, exclusiveENISpec, false, func() error { return nil }); err == nil {
		t.Error("an ExclusiveENI setup ran while veth pods held the node's lock")
	}
	close(release)
	for _, done := range []chan error{a, b} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(podLockPaths(dir, vethSpec("vetha"))[0]); err != nil {
		t.Errorf("setup's pod lock: %v, want kept", err)
	}
	if _, err := os.Stat(podLockPaths(dir, vethSpec("vethb"))[0]); !os.IsNotExist(err) {
		t.Errorf("torn-down pod's lock: %v, want removed", err)
	}
	if err := withDatapathLock(short(), dir, exclusiveENISpec, false, func() error { return nil }); err != nil {
		t.Errorf("ExclusiveENI after the veth pods: %v", err)
	}
}

// TestDatapathLockSharedAddress: a late DEL of the pod that had an
// address and the ADD of the pod that has it now (other veths) do not run
// at once: the to-pod rule names the address only. The DEL removes the
// address's lock file with the veth's.
func TestDatapathLockSharedAddress(t *testing.T) {
	dir := t.TempDir()
	ip := netip.MustParseAddr("192.168.0.7")
	oldPod, newPod := vethSpec("vethold"), vethSpec("vethnew")
	oldPod.IPv4, newPod.IPv4 = ip, ip
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- withDatapathLock(context.Background(), dir, oldPod, true, func() error { close(held); <-release; return nil })
	}()
	<-held
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := withDatapathLock(short, dir, newPod, false, func() error { return nil }); err == nil {
		t.Error("the new pod's ADD ran while the old pod's DEL held its address")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, p := range podLockPaths(dir, oldPod) {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after the DEL: %v, want removed", p, err)
		}
	}
	if err := withDatapathLock(context.Background(), dir, newPod, false, func() error { return nil }); err != nil {
		t.Errorf("the new pod's ADD after the DEL: %v", err)
	}
}

// TestLockFileHolderDies: a plugin process killed (SIGKILL, as a
// runtime's timeout does) while holding a container's lock keeps other
// invocations out while it lives, and frees the lock by dying. The file
// is 0600.
func TestLockFileHolderDies(t *testing.T) {
	dir := t.TempDir()
	h := lockholder.Start(t, "TestHoldContainerLock", dir)
	if st, err := os.Stat(containerLockPath(dir, "c1")); err != nil || st.Mode() != 0o600 {
		t.Errorf("lock file: %v %v, want mode 0600", st.Mode(), err)
	}
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := lockContainer(short, dir, "c1"); err == nil || !strings.Contains(err.Error(), "held by another invocation") {
		t.Fatalf("lock while another process holds it: %v", err)
	}
	h.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l, err := lockContainer(ctx, dir, "c1")
	if err != nil {
		t.Fatalf("lock after its holder was killed: %v", err)
	}
	l.unlock()
}

// TestHoldContainerLock is TestLockFileHolderDies's holder process: it
// locks container c1 in the state directory it is given.
func TestHoldContainerLock(t *testing.T) {
	lockholder.Hold(t, func(dir string) error { _, err := lockContainer(context.Background(), dir, "c1"); return err })
}

// BenchmarkDatapathLockTen is ten ADDs of a node taking the datapath lock
// exclusively at once (a kind that does not set up concurrently, as
// Terway's plugin takes it for all), each holding it 5 ms (a datapath
// setup); it reports how long
// the last one waited. With the lock handed over by the kernel that is
// about nine setups, not the 200 ms polls Terway's plugin waits.
func BenchmarkDatapathLockTen(b *testing.B) {
	dir := b.TempDir()
	var worst time.Duration
	for b.Loop() {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range 10 {
			wg.Go(func() {
				t0 := time.Now()
				err := withDatapathLock(context.Background(), dir, exclusiveENISpec, false, func() error {
					waited := time.Since(t0)
					mu.Lock()
					worst = max(worst, waited)
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
					return nil
				})
				if err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(worst)/float64(time.Millisecond), "worst-wait-ms")
}
