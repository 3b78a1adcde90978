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

// helloComponent builds a one-file module, standing in for the slow
// third-party builds.
func helloComponent(version string) component {
	return component{
		name: "hello", version: version, group: Runtime, modDir: "hello", bins: []string{"hello"},
		runs: func(out string) []goRun {
			return []goRun{{args: []string{"build", "-o", out + "/hello", "."}, env: []string{"CGO_ENABLED=0"}}}
		},
	}
}

// TestEnsureComponent walks the rebuild decisions of a component through
// a real go build: first build, cache hit, new version, lost binary,
// changed source, failed build.
func TestEnsureComponent(t *testing.T) {
	repo := t.TempDir()
	mod := filepath.Join(repo, "hello")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	writeMain := func(body string) {
		t.Helper()
		src := "package main\n\nfunc main() { " + body + " }\n"
		if err := os.WriteFile(filepath.Join(mod, "main.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/hello\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeMain(`println("hi")`)

	cache := t.TempDir()
	logw := &logWriter{t: t}
	e := &ensurer{
		o: Options{RepoDir: repo, CacheDir: cache}, p: newProgress(logw),
		stampPath: filepath.Join(cache, "stamp.json"),
		binDir:    filepath.Join(cache, "bin"), imagesDir: filepath.Join(cache, "images"),
	}
	if err := e.prepareCache(); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.goTool, err = newGoTool(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if e.goInputs, err = e.toolchain(ctx); err != nil {
		t.Fatal(err)
	}

	step := func(what string, c component, wantBuild bool) {
		t.Helper()
		logw.buf.Reset()
		if err := e.ensureComponent(ctx, c); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		built := strings.Contains(logw.buf.String(), "building hello")
		if built != wantBuild {
			t.Fatalf("%s: built = %v, want %v", what, built, wantBuild)
		}
		if !binariesPresent(e.binDir, c.bins) {
			t.Fatalf("%s: no hello in bin/", what)
		}
	}
	step("first run", helloComponent("v1"), true)
	step("second run", helloComponent("v1"), false)
	step("new version", helloComponent("v2"), true)
	if err := os.Remove(filepath.Join(e.binDir, "hello")); err != nil {
		t.Fatal(err)
	}
	step("binary removed", helloComponent("v2"), true)
	writeMain(`println("changed")`)
	step("source changed", helloComponent("v2"), true)

	// A failing build: the error carries the compiler's message, the last
	// good binary and stamp stay, and no temporary directory is left.
	good := readStamp(e.stampPath)
	writeMain(`this is not go`)
	err = e.ensureComponent(ctx, helloComponent("v2"))
	if err == nil || !strings.Contains(err.Error(), "main.go") {
		t.Fatalf("broken source: err = %v, want the compiler's message", err)
	}
	if !binariesPresent(e.binDir, []string{"hello"}) {
		t.Error("a failed build removed the previous binary")
	}
	if readStamp(e.stampPath).Entries["hello"].Key != good.Entries["hello"].Key {
		t.Error("a failed build changed the stamp")
	}
	if left, _ := filepath.Glob(filepath.Join(cache, ".build-*")); len(left) != 0 {
		t.Errorf("temporary build dirs left: %v", left)
	}
}

// TestRemoveLeftovers: what a killed run leaves behind goes on the next.
func TestRemoveLeftovers(t *testing.T) {
	cache := t.TempDir()
	e := &ensurer{o: Options{CacheDir: cache}, binDir: filepath.Join(cache, "bin"), imagesDir: filepath.Join(cache, "images")}
	if err := e.prepareCache(); err != nil {
		t.Fatal(err)
	}
	leftovers := []string{
		filepath.Join(cache, ".build-123", "kubelet"),
		filepath.Join(cache, ".stamp.json-456"),
		filepath.Join(cache, "images", ".terway.tar-789"),
	}
	keep := []string{filepath.Join(cache, "images", "terway.tar"), filepath.Join(cache, ".gitignore")}
	for _, p := range append(append([]string{}, leftovers...), keep...) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.removeLeftovers(); err != nil {
		t.Fatal(err)
	}
	for _, p := range leftovers {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", p, err)
		}
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}

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
	waiting := &signalWriter{says: "waiting for another prereq run", seen: make(chan struct{}, 1)}
	go func() {
		u, err := lockCache(context.Background(), path, newProgress(waiting))
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case <-waiting.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never said it waits")
	}
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

// signalWriter signals on seen when a write contains says; seen has room
// for one signal, later ones are dropped.
type signalWriter struct {
	says string
	seen chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.says) {
		select {
		case w.seen <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}
