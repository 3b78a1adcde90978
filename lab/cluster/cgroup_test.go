package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestIsLabCgroup(t *testing.T) {
	for rel, want := range map[string]bool{
		nodeCgroup("lab-1"):                 true,
		nodeCgroup("lab-2") + "/kubepods/x": true,
		"terway-labx/y":                     false,
		"user.slice":                        false,
		"system.slice/terway-lab.lab-1":     false,
		"":                                  false,
	} {
		if got := IsLabCgroup(rel); got != want {
			t.Errorf("IsLabCgroup(%q) = %v, want %v", rel, got, want)
		}
	}
}

// A power-off leaves no cgroup of the node, the dead pods' included,
// even when a killed process is still on its way out.
func TestRemoveCgroupWhenEmpty(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a cgroup tree under " + cgroupFS)
	}
	name := nodeCgroup(fmt.Sprintf("t%d", os.Getpid()))
	t.Cleanup(func() { _ = removeCgroup(name) })
	if err := createCgroup(name); err != nil {
		t.Fatal(err)
	}
	hs, err := cgroupHierarchies()
	if err != nil || len(hs) == 0 {
		t.Fatalf("hierarchies %v: %v", hs, err)
	}
	pod := filepath.Join("kubepods", "besteffort", "pod1", "c1")
	for _, h := range hs {
		if err := os.MkdirAll(filepath.Join(h, name, pod), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill() })
	procs := filepath.Join(hs[0], name, pod, "cgroup.procs")
	if err := os.WriteFile(procs, []byte(strconv.Itoa(sleep.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := removeCgroup(name); err == nil {
		t.Fatal("removed a cgroup tree with a live process in it")
	}
	// The removal starts while the process lives and must wait it out.
	done := make(chan error, 1)
	go func() { done <- removeCgroupWhenEmpty(name) }()
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("gave up on a cgroup tree with a live process in it: %v", err)
	default:
	}
	_ = sleep.Process.Kill()
	_ = sleep.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived: %v", filepath.Join(h, name), err)
		}
	}
}
