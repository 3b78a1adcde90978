package cni

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/terway-sim/terway/cni/datapath"
)

// ReapCommand is the argument that makes the terway binary reap retired
// host veths (ReapMain) instead of acting as a CNI plugin.
const ReapCommand = "reap-links"

// spawnReaper starts a detached copy of this binary that deletes the host
// veths the DEL retired, and does not wait for it: the runtime gets its
// answer while the kernel takes its time over the deletions. The child
// runs in the plugin's network namespace (the node's), in its own session
// and with no stdio, so the runtime's pipes close when the plugin exits.
// Should it never run, the pod namespace's removal, the next DEL or GC
// remove the retired veths.
func spawnReaper(hostNetNS string) error {
	if hostNetNS != "" {
		return reapNow(hostNetNS) // not the binary's own namespace: do it here
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	cmd := exec.Command(self, ReapCommand)
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start reaper: %w", err)
	}
	return cmd.Process.Release()
}

// ReapMain deletes the retired host veths of the node's network namespace
// (the caller's) and exits: 0 when all are gone.
func ReapMain() {
	if _, err := datapath.Reap(""); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}
