// Package lockholder lets a test prove what its file lock does across
// processes: it runs the test binary again as a second process that takes
// the lock with the package's own code and holds it until it is killed,
// so the test can check that the lock keeps others out while held and is
// free once its holder dies (SIGKILL: no chance to unlock).
//
// A package declares a holder test and starts it by name:
//
//	func TestHoldLock(t *testing.T) {
//		lockholder.Hold(t, func(path string) error { _, err := takeLock(path); return err })
//	}
//
//	h := lockholder.Start(t, "TestHoldLock", path)
//	... the lock is held elsewhere ...
//	h.Kill()
package lockholder

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// pathEnv carries the lock file's path to the holder process.
const pathEnv = "TERWAY_TEST_LOCK_HOLDER_PATH"

// held is the line the holder prints once it holds the lock.
const held = "held\n"

// Hold is the body of a holder test. In the process Start runs, it calls
// take with the lock's path, prints that it holds it and waits, lock held,
// until it is killed (or its parent is gone: its stdin closes). In an
// ordinary test run it skips.
func Hold(t *testing.T, take func(path string) error) {
	path := os.Getenv(pathEnv)
	if path == "" {
		t.Skip("the holder process of a lock test (lockholder.Start)")
	}
	if err := take(path); err != nil {
		t.Fatalf("take the lock %s: %v", path, err)
	}
	_, _ = os.Stdout.WriteString(held)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	t.Fatal("the holder was not killed")
}

// Holder is a process holding a lock.
type Holder struct{ cmd *exec.Cmd }

// Start runs the holder test named test (see Hold) of this test binary
// on path and returns once it holds the lock. The holder is killed at the
// end of t if Kill did not kill it first.
func Start(t *testing.T, test, path string) *Holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), pathEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.StdinPipe(); err != nil { // held open: the holder waits on it
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the lock holder: %v", err)
	}
	h := &Holder{cmd: cmd}
	t.Cleanup(h.Kill)
	// The holder's TestMain may print before the test runs.
	r := bufio.NewReader(out)
	var said string
	for {
		line, err := r.ReadString('\n')
		if line == held {
			return h
		}
		said += line
		if err != nil {
			h.Kill()
			t.Fatalf("the lock holder ended (%v) without holding the lock; it said:\n%s", err, said)
		}
	}
}

// Kill kills the holder with SIGKILL, so it cannot unlock, and waits for
// it to be gone.
func (h *Holder) Kill() {
	if h.cmd.ProcessState != nil {
		return
	}
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	_ = h.cmd.Wait()
}
