package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/internal/lockholder"
)

// TestNodeLock: the node lock is exclusive, a second taker waits its
// timeout and then fails naming the file, a waiter gets the lock when the
// holder releases it, and the file is 0600 in a 0700 directory.
func TestNodeLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "terwayd.lock")
	l, err := takeLock(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
		if st, err := os.Stat(p); err != nil || st.Mode() != want {
			t.Errorf("%s: %v %v, want mode %v", p, st.Mode(), err, want)
		}
	}
	start := time.Now()
	if _, err := takeLock(path, 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "another terwayd holds "+path) {
		t.Fatalf("second lock while held: %v", err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("gave up after %v, before its 300ms timeout", waited)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := takeLock(path, 5*time.Second)
		if err == nil {
			err = l2.Unlock()
		}
		got <- err
	}()
	time.Sleep(150 * time.Millisecond)
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
}

// TestNodeLockFreedWhenHolderDies: a daemon process killed with SIGKILL
// while holding the node lock keeps others out while it lives and does not
// keep the next daemon out once dead (the kernel drops an flock with its
// holder).
func TestNodeLockFreedWhenHolderDies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "terwayd.lock")
	h := lockholder.Start(t, "TestHoldNodeLock", path)
	if _, err := takeLock(path, 200*time.Millisecond); err == nil {
		t.Error("lock taken while another process holds it")
	}
	h.Kill()
	l, err := takeLock(path, 200*time.Millisecond)
	if err != nil {
		t.Fatalf("lock after its holder was killed: %v", err)
	}
	_ = l.Unlock()
}

// TestHoldNodeLock is TestNodeLockFreedWhenHolderDies's holder process.
func TestHoldNodeLock(t *testing.T) {
	lockholder.Hold(t, func(path string) error { _, err := takeLock(path, time.Second); return err })
}
