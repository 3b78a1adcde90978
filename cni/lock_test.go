package cni

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

	var holders, maxHolders atomic.Int32
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
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
	time.Sleep(50 * time.Millisecond)
	l.unlockAndRemove()
	wg.Wait()
	if maxHolders.Load() != 1 {
		t.Errorf("%d holders at once, want 1", maxHolders.Load())
	}
	if _, err := os.Stat(containerLockPath(dir, "c1")); !os.IsNotExist(err) {
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
		_ = withDatapathLock(context.Background(), dir, func() error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ran := false
	err := withDatapathLock(ctx, dir, func() error { ran = true; return nil })
	close(release)
	if err == nil || ran {
		t.Fatalf("lock taken while held: err %v ran %v", err, ran)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, "datapath.lock")) {
		t.Errorf("error %q does not name the lock", err)
	}
}
