package prereq

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/internal/lockholder"
)

// TestLockCacheExcludes: a second holder says once that it waits, waits
// until the first unlocks, and gives up when its context ends. The lock
// file is 0644.
func TestLockCacheExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	w := &logWriter{t: t}
	p := newProgress(w)
	unlock, err := lockCache(context.Background(), path, p)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode() != 0o644 {
		t.Errorf("lock file: %v %v, want mode 0644", st.Mode(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	if _, err := lockCache(ctx, path, p); err == nil {
		t.Fatal("second lock taken while the first is held")
	}
	if n := strings.Count(w.buf.String(), "waiting for another prereq run"); n != 1 {
		t.Errorf("said %d times that it waits, want once:\n%s", n, w.buf.String())
	}
	got := make(chan error, 1)
	go func() {
		u, err := lockCache(context.Background(), path, p)
		if err == nil {
			u()
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter never got the lock")
	}
}

// TestLockCacheHolderDies: a lab command killed while it holds the cache
// lock leaves nothing to clean up: the next one gets the lock.
func TestLockCacheHolderDies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	p := newProgress(&logWriter{t: t})
	h := lockholder.Start(t, "TestHoldCacheLock", path)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	if _, err := lockCache(ctx, path, p); err == nil {
		t.Fatal("lock taken while another process holds it")
	}
	h.Kill()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	unlock, err := lockCache(ctx, path, p)
	if err != nil {
		t.Fatalf("lock after its holder was killed: %v", err)
	}
	unlock()
}

// TestHoldCacheLock is TestLockCacheHolderDies's holder process.
func TestHoldCacheLock(t *testing.T) {
	lockholder.Hold(t, func(path string) error {
		_, err := lockCache(context.Background(), path, newProgress(os.Stderr))
		return err
	})
}
