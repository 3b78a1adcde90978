package hostcheck

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/internal/testwait"
)

func take(t *testing.T, o Options) *Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	s, err := o.Take(ctx)
	if err != nil {
		t.Fatalf("take snapshot: %v", err)
	}
	t.Logf("snapshot in %v: %d links, %d routes, %d sysctls, %d mounts, %d processes; notes %q",
		time.Since(start).Round(time.Millisecond), len(s.Network.Links), len(s.Network.Routes),
		len(s.Sysctls), len(s.Mounts), len(s.Processes), s.Notes)
	return s
}

// foreign reports differences this machine's other users cause while a
// test runs: processes (builds, other sessions, a lab someone runs),
// namespaces and their nsfs bind mounts (other packages' tests create them
// in /run/netns and in temporary directories), and the cgroups of a lab
// running here (named terway-lab…).
func foreign(ours *Snapshot) (DiffOptions, func(Difference) bool) {
	// Processes come and go with other work, in this session too (the go
	// command links other test binaries while this one runs); that new
	// processes are found is TestDetectsChanges's job.
	opts := DiffOptions{IgnoreProcess: func(Process) bool { return true }}
	return opts, func(d Difference) bool {
		switch d.Area {
		case AreaNamespaces:
			return true
		case AreaMounts:
			// Other packages' tests keep namespaces as nsfs bind mounts in
			// /run/netns or in their temporary directories.
			return strings.Contains(d.Item, " nsfs ")
		case AreaCgroups:
			return strings.Contains(d.Item, "terway-lab")
		}
		return false
	}
}

// TestTakeTwiceIsStable takes pairs of snapshots with what they must leave
// out changing in between (volatileChange): only the work of others may
// differ. The watched paths are a temporary directory (the production ones
// change while a lab runs on this machine).
func TestTakeTwiceIsStable(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{Paths: []string{dir, filepath.Join(dir, "missing")}}
	for round := range 3 {
		before := take(t, o)
		volatileChange(t)
		after := take(t, o)
		opts, isForeign := foreign(after)
		for _, d := range opts.Diff(before, after) {
			if isForeign(d) {
				t.Logf("round %d, others' work (ignored): %v", round, d)
				continue
			}
			t.Errorf("round %d: nothing happened, yet %v", round, d)
		}
	}
}

// volatileChange makes, and waits to see, what a snapshot must leave out:
// a second on the kernel's clock, over which address lifetimes and
// neighbour timers run, and loopback traffic, which moves link counters.
func volatileChange(t *testing.T) {
	t.Helper()
	start, packets := uptime(t), loPackets(t)
	c, err := net.Dial("udp", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("volatile")); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "loopback traffic and a second of kernel time", func() bool {
		return loPackets(t) > packets && uptime(t)-start >= 1
	})
}

// uptime is the kernel's clock, in seconds since boot.
func uptime(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatalf("/proc/uptime %q: %v", b, err)
	}
	return f
}

// loPackets is what loopback received.
func loPackets(t *testing.T) uint64 {
	t.Helper()
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	return lo.Attrs().Statistics.RxPackets
}

func TestFirewallAbsenceIsNoted(t *testing.T) {
	needRoot(t)
	s := take(t, Options{Paths: []string{}})
	for _, fam := range []string{"iptables", "ip6tables", "ebtables"} {
		d, ok := s.Firewall[fam]
		if !ok {
			t.Fatalf("no %s entry", fam)
		}
		if !d.Absent {
			continue
		}
		if !strings.Contains(strings.Join(s.Notes, "\n"), fam+": no ") {
			t.Errorf("%s absent without a note: %q", fam, s.Notes)
		}
	}
}

// changes are what TestDetectsChanges made, each to be found in the diff.
type changes struct {
	ns                                  *testnetns.NS
	nsPath, nsInode, cgroup, cgroupItem string
	orphan, nsOrphan, child             int
	watched, missing                    string
}

func TestDetectsChanges(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	c := changes{watched: filepath.Join(dir, "watched"), missing: filepath.Join(dir, "missing")}
	if err := os.Mkdir(c.watched, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := Options{Paths: []string{c.watched, c.missing}}
	before := take(t, opts)

	makeNamespace(t, &c)
	makeCgroup(t, before, &c)
	c.orphan = startOrphan(t, "sleep 30")
	if _, err := exec.LookPath("nsenter"); err == nil {
		c.nsOrphan = startOrphan(t, "nsenter --net="+c.nsPath+" sleep 30")
	} else {
		t.Log("no nsenter: a namespace held only by a process is not tested")
	}
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	c.child = child.Process.Pid
	if err := os.WriteFile(filepath.Join(c.watched, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(c.missing, 0o755); err != nil {
		t.Fatal(err)
	}

	ds := Diff(before, take(t, opts))
	for _, w := range c.expected() {
		if !containsDiff(ds, w) {
			t.Errorf("missing %v in\n%s", w, render(ds))
		}
	}
	for _, d := range ds {
		if d.Area == AreaProcesses && strings.HasPrefix(d.Item, fmt.Sprintf("pid %d ", c.child)) {
			t.Errorf("a descendant of the taker is reported: %v", d)
		}
	}

	undo(t, &c)
	ds = Diff(before, take(t, opts))
	for _, w := range c.expected() {
		if containsDiff(ds, w) {
			t.Errorf("still reported after undoing: %v", w)
		}
	}
}

// want is a difference expected by area and item prefix, with a fragment
// of its after value.
type want struct{ area, item, after string }

func (c changes) expected() []want {
	ws := []want{
		{AreaNamespaces, c.nsPath, c.nsInode},
		{AreaMounts, c.nsPath + " nsfs", "present"},
		{AreaCgroups, c.cgroupItem, "present"},
		{AreaProcesses, fmt.Sprintf("pid %d (sleep)", c.orphan), "cmd sleep 30"},
		{AreaPaths, filepath.Join(c.watched, "f"), "file 5"},
		{AreaPaths, c.missing, "dir"},
	}
	if c.nsOrphan != 0 {
		ws = append(ws, want{AreaNamespaces, c.nsInode, fmt.Sprintf("pid %d (sleep)", c.nsOrphan)})
	}
	return ws
}

func (w want) String() string { return fmt.Sprintf("%s: %s… -> …%s…", w.area, w.item, w.after) }

func containsDiff(ds []Difference, w want) bool {
	for _, d := range ds {
		if d.Area == w.area && strings.HasPrefix(d.Item, w.item) && strings.Contains(d.After, w.after) {
			return true
		}
	}
	return false
}

func makeNamespace(t *testing.T, c *changes) {
	t.Helper()
	n := testnetns.ForTest(t)
	var st unix.Stat_t
	if err := unix.Stat(n.Path(), &st); err != nil {
		t.Fatal(err)
	}
	// Snapshots name the file under /run/netns, as the mount table does;
	// testutils creates it through /var/run/netns.
	dir, err := filepath.EvalSymlinks(filepath.Dir(n.Path()))
	if err != nil {
		t.Fatal(err)
	}
	c.ns, c.nsPath, c.nsInode = n, filepath.Join(dir, filepath.Base(n.Path())), fmt.Sprintf("net:[%d]", st.Ino)
}

// makeCgroup creates a cgroup in the pids hierarchy (or the first one).
func makeCgroup(t *testing.T, s *Snapshot, c *changes) {
	t.Helper()
	hierarchy := "pids"
	if _, ok := s.Cgroups[hierarchy]; !ok {
		for h := range s.Cgroups {
			hierarchy = h
			break
		}
	}
	if hierarchy == "" || s.Cgroups[hierarchy] == nil {
		t.Fatalf("no cgroup hierarchy found: %v", s.Notes)
	}
	name := fmt.Sprintf("hostcheck-test-%d", os.Getpid())
	c.cgroup = filepath.Join("/sys/fs/cgroup", hierarchy, name)
	c.cgroupItem = hierarchy + "/" + name
	if err := os.Mkdir(c.cgroup, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(c.cgroup) })
}

// startOrphan starts command in the background of a shell that exits at
// once: the command is reparented away from the test (a leftover daemon,
// not a descendant). It returns the command's PID and kills it in cleanup
// if it is still that process.
func startOrphan(t *testing.T, command string) int {
	t.Helper()
	out, err := exec.Command("sh", "-c", command+" </dev/null >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatalf("start %s: %v", command, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("pid of %s: %q", command, out)
	}
	p, ok := readProcess(pid)
	if !ok {
		t.Fatalf("%s (pid %d) is not running", command, pid)
	}
	t.Cleanup(func() { killOrphan(t, p) })
	// "nsenter ... sleep 30" becomes sleep only once nsenter has exec'd:
	// on a busy machine that is after the snapshot the test compares.
	fields := strings.Fields(command)
	want := fields[len(fields)-2]
	testwait.Until(t, 10*time.Second, fmt.Sprintf("pid %d to run %s", pid, want), func() bool {
		now, ok := readProcess(pid)
		return !ok || now.Comm == want
	})
	return pid
}

// killOrphan kills p if that PID is still p, and waits until it is gone
// (its new parent reaps it; a zombie does not count as running).
func killOrphan(t *testing.T, p Process) {
	now, ok := readProcess(p.PID)
	if !ok || !now.same(p) {
		return
	}
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		t.Errorf("kill %v: %v", p, err)
		return
	}
	testwait.Until(t, 5*time.Second, fmt.Sprintf("%v gone after SIGKILL", p), func() bool {
		now, ok := readProcess(p.PID)
		return !ok || !now.same(p)
	})
}

// undo reverts everything TestDetectsChanges made, before the cleanups
// would, so that the next snapshot must be back to the first.
func undo(t *testing.T, c *changes) {
	t.Helper()
	for _, pid := range []int{c.orphan, c.nsOrphan} {
		if p, ok := readProcess(pid); ok && pid != 0 {
			killOrphan(t, p)
		}
	}
	for _, path := range []string{c.cgroup, c.missing, filepath.Join(c.watched, "f")} {
		if err := os.Remove(path); err != nil {
			t.Fatalf("undo: %v", err)
		}
	}
	if err := c.ns.Remove(); err != nil {
		t.Fatalf("undo: remove namespace: %v", err)
	}
}
