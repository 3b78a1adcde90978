package hostcheck

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// formatVersion is the Snapshot layout written by Save; Load refuses
// others rather than compare fields that mean something else.
const formatVersion = 1

// Snapshot is the machine state the lab must leave untouched. Every field
// is plain data so that it survives Save and Load between `up` and `down`.
type Snapshot struct {
	Version int       `json:"version"`
	Taken   time.Time `json:"taken"`
	// BootID is kernel.random.boot_id: process start times only compare
	// within one boot.
	BootID string `json:"bootID"`
	// Taker is the process that took the snapshot; Diff ignores the
	// second snapshot's taker and its descendants.
	Taker Process `json:"taker"`
	// RootNetNS identifies the root network namespace, "net:[inode]".
	RootNetNS string `json:"rootNetNS"`
	// NetNSFiles maps a file in a netns directory to what is bound to it.
	NetNSFiles map[string]string `json:"netnsFiles"`
	Network    Network           `json:"network"`
	// Firewall is keyed by family: iptables, ip6tables, ebtables.
	Firewall map[string]Dump `json:"firewall"`
	// Sysctls maps a dotted sysctl name to its value.
	Sysctls map[string]string `json:"sysctls"`
	// Mounts counts each "mountpoint fstype source options" line.
	Mounts map[string]int `json:"mounts"`
	// Cgroups maps a hierarchy (its mount point relative to the cgroup
	// root, "." for the root itself) to its directories.
	Cgroups   map[string][]string `json:"cgroups"`
	Processes []Process           `json:"processes"`
	// Paths maps each watched path to its state.
	Paths map[string]PathState `json:"paths"`
	// Notes say what could not be recorded (an absent command, an
	// unreadable directory); they are not compared.
	Notes []string `json:"notes,omitempty"`
}

// Options choose what Take looks at; zero fields take the defaults.
// Tests point Paths and NetNSDirs at temporary directories.
type Options struct {
	// Paths are the directories listed; default DefaultPaths().
	Paths []string
	// NetNSDirs hold namespace files; default /run/netns and
	// /var/run/netns (one entry if they are the same directory).
	NetNSDirs []string
	// CgroupRoot is where cgroup hierarchies are mounted; default
	// /sys/fs/cgroup.
	CgroupRoot string
}

// DefaultPaths are the node paths the lab bind-mounts per node, plus its
// own state directory: with the mount namespaces working, none of them
// changes on the machine.
func DefaultPaths() []string {
	return []string{
		"/etc/eni", "/opt/cni/bin", "/var/run/eni", "/var/lib/cni", "/etc/cni/net.d",
		"/var/lib/kubelet", "/run/containerd", "/var/lib/containerd", "/var/log/pods",
		"/var/log/containers", "/run/netns", "/var/lib/terway-lab",
	}
}

func (o Options) withDefaults() Options {
	if o.Paths == nil {
		o.Paths = DefaultPaths()
	}
	if o.NetNSDirs == nil {
		o.NetNSDirs = []string{"/run/netns", "/var/run/netns"}
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = "/sys/fs/cgroup"
	}
	return o
}

// Take records the machine with the default Options.
func Take(ctx context.Context) (*Snapshot, error) { return Options{}.Take(ctx) }

// Take records the machine. It fails when a source that every Linux host
// has (netlink, /proc) cannot be read; optional sources (firewall
// commands, a missing directory) become notes.
func (o Options) Take(ctx context.Context) (*Snapshot, error) {
	o = o.withDefaults()
	s := &Snapshot{Version: formatVersion, Taken: time.Now().UTC()}
	steps := []struct {
		what string
		run  func() error
	}{
		{"processes", s.takeProcesses},
		{"network namespace files", func() error { return s.takeNetNSFiles(o.NetNSDirs) }},
		{"root network namespace", func() error { return s.takeRootNetNS(ctx) }},
		{"mounts and cgroups", func() error { return s.takeMounts(o.CgroupRoot) }},
		{"paths", func() error { return s.takePaths(o.Paths) }},
	}
	for _, st := range steps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		if err := st.run(); err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", st.what, err)
		}
	}
	slices.Sort(s.Notes)
	return s, nil
}

// takeRootNetNS reads what lives in the root network namespace on a
// thread pinned to it: sysctls under /proc/sys/net and the firewall
// commands (children inherit the forking thread's namespace) follow the
// thread, and a goroutine elsewhere in the process may have moved its own
// thread into a node namespace.
func (s *Snapshot) takeRootNetNS(ctx context.Context) error {
	root, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return fmt.Errorf("read own network namespace: %w", err)
	}
	s.RootNetNS = root
	return ns.WithNetNSPath("/proc/self/ns/net", func(ns.NetNS) error {
		if err := s.Network.take(); err != nil {
			return err
		}
		s.takeFirewall(ctx)
		return s.takeSysctls()
	})
}

func (s *Snapshot) note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

// readBootID returns kernel.random.boot_id (which VolatileSysctls leaves
// out of Sysctls with the rest of kernel.random).
func readBootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
