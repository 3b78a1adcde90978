// Command pause is the sandbox process of every pod in the lab, packed as
// lab.local/pause:1: it holds the pod's namespaces open by staying alive,
// exits 0 on SIGTERM or SIGINT, and, being PID 1 of a pod that shares its
// PID namespace, reaps the zombies that get reparented to it — the job of
// Kubernetes' own pause container, written in Go so the project builds
// it (statically, CGO_ENABLED=0) instead of pulling it from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Buffered: a burst of SIGCHLDs while reaping coalesces, and reap
	// collects every exited child each time, so none is left behind.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap collects every child that has exited, without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
