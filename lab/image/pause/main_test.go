package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terway-sim/terway/internal/testwait"
)

// build compiles the program the way prereq does (static).
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pause")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestExitsZeroOnSignal(t *testing.T) {
	bin := build(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			// SIGCHLD first: it must not end the program.
			waitIdle(t, cmd.Process.Pid)
			if err := cmd.Process.Signal(syscall.SIGCHLD); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("pause after %v: %v, want exit 0", sig, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("pause still running 10s after %v", sig)
			}
		})
	}
}

// waitIdle waits until pid has slept for 100ms in a row. Go's runtime
// catches SIGTERM from its first instruction (SigCgt says nothing), and
// before signal.Notify ran it dies of the signal instead of exiting 0, so
// the test waits for main to block on its channel: the process goes idle.
func waitIdle(t *testing.T, pid int) {
	t.Helper()
	var idleSince time.Time
	testwait.Until(t, 20*time.Second, "pause (pid "+strconv.Itoa(pid)+") idle", func() bool {
		if state(pid) != "S" {
			idleSince = time.Time{}
			return false
		}
		if idleSince.IsZero() {
			idleSince = time.Now()
		}
		return time.Since(idleSince) >= 100*time.Millisecond
	})
}

// TestReapCollectsZombies starts a child without waiting for it and checks
// that reap leaves no zombie behind.
func TestReapCollectsZombies(t *testing.T) {
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "child "+strconv.Itoa(pid)+" a zombie", func() bool { return state(pid) == "Z" })
	reap()
	if s := state(pid); s != "" {
		t.Fatalf("child %d still in state %q after reap", pid, s)
	}
}

// state is the process state letter of pid, "" when it is gone.
func state(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}
