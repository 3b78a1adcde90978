package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// What a reboot clears and a power-off therefore clears too: the kernel
// state of the node's network namespace, its cgroups and its tmpfs /run.
// The namespace itself stays (it is the instance's, made by the fabric,
// with its loopback relays in it), and so do the node's disks under its
// Root.

// clearAfterPowerOff makes the stopped node look as a rebooted one will:
// no links but lo, the kernel's default rules, no routes but the local
// table's, empty iptables tables, no cgroup, and an empty /run. The
// fabric has unplugged the ENIs already; what is left was made by the
// node's own processes (pods' host veths, the daemon's rules and routes,
// kube-proxy's chains, the kubelet's pod cgroups). Left in place, the dead
// containers' cgroups cost the booting kubelet about 3 s each (cAdvisor
// asks containerd for every one): 3½ minutes before a node with 60 of them
// ran a pod again.
func clearAfterPowerOff(n NodeState) error {
	return errors.Join(flushNetwork(n.NetNS), flushIPTables(n.NetNS), removeCgroupWhenEmpty(n.Cgroup), emptyRun(n))
}

// removeCgroupWhenEmpty removes the node's cgroup tree once the kernel
// has let its killed processes go (a cgroup with a dying task is busy).
func removeCgroupWhenEmpty(name string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := removeCgroup(name)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// defaultRulePriorities are the rules a new namespace has: local, main
// and default.
var defaultRulePriorities = map[int]bool{0: true, 32766: true, 32767: true}

// flushNetwork removes every link but lo, every non-default rule and
// every route outside the local table from the namespace at path.
func flushNetwork(path string) error {
	h, err := nlsafe.Open(path)
	if err != nil {
		return err
	}
	defer h.Close()
	var errs []error
	links, err := h.LinkList()
	if err != nil {
		return fmt.Errorf("list links in %s: %w", path, err)
	}
	for _, l := range links {
		if l.Attrs().Name == "lo" {
			continue
		}
		// A veth's peer may have gone with it (pod namespaces being
		// destroyed), so a missing link is no error.
		if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete link %s: %w", l.Attrs().Name, err))
		}
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := h.RuleList(fam)
		if err != nil {
			errs = append(errs, fmt.Errorf("list rules: %w", err))
			continue
		}
		for _, r := range rules {
			if defaultRulePriorities[r.Priority] {
				continue
			}
			if err := h.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("delete rule %v: %w", r, err))
			}
		}
		routes, err := h.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			errs = append(errs, fmt.Errorf("list routes: %w", err))
			continue
		}
		for _, r := range routes {
			if r.Table == unix.RT_TABLE_LOCAL || (fam == netlink.FAMILY_V6 && r.Type == unix.RTN_UNREACHABLE) {
				continue
			}
			if err := h.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("delete route %v: %w", r, err))
			}
		}
	}
	return errors.Join(errs...)
}

// builtinChains are the built-in chains of each iptables table.
var builtinChains = map[string][]string{
	"filter":   {"INPUT", "FORWARD", "OUTPUT"},
	"nat":      {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle":   {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"raw":      {"PREROUTING", "OUTPUT"},
	"security": {"INPUT", "FORWARD", "OUTPUT"},
}

// flushIPTables empties every iptables and ip6tables table the namespace
// at path has: built-in chains empty with policy ACCEPT, no other chain.
// It uses the iptables on PATH, the one kube-proxy and the daemon use.
func flushIPTables(path string) error {
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(tool + "-save"); err != nil {
			continue // no iptables here: then nobody made rules with it
		}
		out, err := exec.Command("nsenter", "--net="+path, "--", tool+"-save").Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s-save in %s: %w", tool, path, err))
			continue
		}
		in := resetRuleset(out)
		if len(in) == 0 {
			continue
		}
		cmd := exec.Command("nsenter", "--net="+path, "--", tool+"-restore")
		cmd.Stdin = bytes.NewReader(in)
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s-restore in %s: %v: %s", tool, path, err, out))
		}
	}
	return errors.Join(errs...)
}

// resetRuleset is iptables-restore input that resets every table
// iptables-save listed: restoring a table without --noflush flushes it
// and deletes its own chains.
func resetRuleset(saved []byte) []byte {
	var b bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(saved))
	for sc.Scan() {
		table, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "*")
		chains, known := builtinChains[table]
		if !ok || !known {
			continue
		}
		fmt.Fprintf(&b, "*%s\n", table)
		for _, c := range chains {
			fmt.Fprintf(&b, ":%s ACCEPT [0:0]\n", c)
		}
		b.WriteString("COMMIT\n")
	}
	return b.Bytes()
}

// emptyRun empties the node's /run directories, a tmpfs on a real
// machine. Nothing is mounted below them on the machine's side: the
// node's mounts lived in its mount namespace, gone with its processes.
func emptyRun(n NodeState) error {
	var errs []error
	for _, p := range nodePaths {
		if !strings.HasPrefix(p, "/run/") {
			continue
		}
		dir := n.HostPath(p)
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("empty %s of %s: %w", p, n.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}
