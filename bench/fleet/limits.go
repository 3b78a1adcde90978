package fleet

import (
	"fmt"
	"os"
	"syscall"
)

// fleetFilesPerNode is a generous estimate of the descriptors one
// simulated node holds at its busiest: store, lock, socket listener, the
// gRPC connection (both ends), and a few keep-alive SDK connections to
// fakecloud (both ends, since the server is in this process too).
const fleetFilesPerNode = 14

// fleetEnsureFiles raises this process's soft open-file limit up to the
// hard limit when the fleet needs more, and refuses a fleet that cannot
// fit under the hard limit. Go already raises the soft limit at start on
// Linux, so usually nothing changes.
func fleetEnsureFiles(nodes int) error {
	need := uint64(nodes*fleetFilesPerNode + 512)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("fleet: read the open-file limit: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	if lim.Max < need {
		return fmt.Errorf("fleet: %d nodes need about %d open files, the hard limit is %d (ulimit -Hn)", nodes, need, lim.Max)
	}
	lim.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("fleet: raise the open-file limit to %d: %w", need, err)
	}
	return nil
}

// fleetOpenFiles counts this process's open descriptors (-1 when unknown).
func fleetOpenFiles() int {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return -1
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return -1
	}
	return len(names) - 1 // the directory itself
}
