package hostcheck

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// synthetic is a small snapshot taken by pid 100 (started at tick 50).
func synthetic() *Snapshot {
	taker := Process{PID: 100, PPID: 1, SID: 100, Comm: "terway-lab", Start: 50, NetNS: "net:[1]"}
	return &Snapshot{
		Version: formatVersion, BootID: "b1", Taker: taker, RootNetNS: "net:[1]",
		NetNSFiles: map[string]string{"/run/netns/other": "net:[9]"},
		Network: Network{
			Links:             map[string]string{"eth0": "type device up mtu 1500 mac 02:00:00:00:00:01"},
			Routes:            map[string]string{"inet table main unicast default dev eth0 metric 0": "via 10.0.0.1"},
			Neighbours:        map[string]string{},
			DynamicNeighbours: map[string]string{"eth0 10.0.0.1 lladdr 02:00:00:00:00:fe": "dynamic"},
		},
		Firewall: map[string]Dump{"iptables": {Absent: true}},
		Sysctls:  map[string]string{"net.ipv4.ip_forward": "0", "kernel.modprobe": ""},
		Mounts:   map[string]int{"/ rootfs / rw": 1},
		Cgroups:  map[string][]string{"pids": {"a"}},
		Processes: []Process{
			{PID: 1, Comm: "init", Start: 1, NetNS: "net:[1]"},
			{PID: 7, PPID: 1, SID: 7, Comm: "gone", Start: 30, NetNS: "net:[1]"},
			taker,
		},
		Paths: map[string]PathState{"/etc/eni": {}},
	}
}

func TestDiffEqualSnapshots(t *testing.T) {
	if ds := Diff(synthetic(), synthetic()); len(ds) != 0 {
		t.Fatalf("equal snapshots differ: %v", ds)
	}
}

func TestDiffReportsEachArea(t *testing.T) {
	before, after := synthetic(), synthetic()
	// The second snapshot is taken by another process (the down command),
	// with a child of its own.
	after.Taker = Process{PID: 200, PPID: 1, SID: 200, Comm: "terway-lab", Start: 900, NetNS: "net:[1]"}
	after.Processes = []Process{
		{PID: 1, Comm: "init", Start: 1, NetNS: "net:[1]"},
		after.Taker,
		{PID: 201, PPID: 200, SID: 200, Comm: "iptables-save", Start: 901, NetNS: "net:[1]"},
		{PID: 300, PPID: 1, SID: 300, Comm: "kubelet", Start: 500, NetNS: "net:[5]", Cmdline: "kubelet --v=2"},
		{PID: 7, PPID: 1, SID: 7, Comm: "sleep", Start: 600, NetNS: "net:[1]"}, // PID 7 reused
		{PID: 400, PPID: 1, SID: 400, Comm: "other", Start: 700, NetNS: "net:[9]"},
	}
	after.Network.Links["veth1"] = "type veth up mtu 1500"
	after.Network.DynamicNeighbours = map[string]string{"eth0 10.0.0.2 lladdr 02:00:00:00:00:02": "dynamic"}
	after.Network.Neighbours = map[string]string{"eth0 10.0.0.9": "lladdr 02:00:00:00:00:09"}
	after.Firewall = map[string]Dump{"iptables": {Command: "iptables-save", Lines: []string{"table nat", "table nat"}}}
	after.Sysctls = map[string]string{"net.ipv4.ip_forward": "1"}
	after.Mounts = map[string]int{"/ rootfs / rw": 1, "/run/netns/x nsfs nsfs rw": 2}
	after.Cgroups = map[string][]string{"pids": {"a", "a/terway-lab-n1"}}
	after.Paths = map[string]PathState{"/etc/eni": {Exists: true, Kind: "dir", Entries: map[string]string{"eni.json": "file 3"}}}
	after.NetNSFiles = map[string]string{}

	got := Diff(before, after)
	want := []Difference{
		{AreaNamespaces, "/run/netns/other", "net:[9]", ""},
		{AreaNamespaces, "net:[5]", "", "held by pid 300 (kubelet)"},
		{AreaLinks, "veth1", "", "type veth up mtu 1500"},
		{AreaNeighbours, "eth0 10.0.0.9", "", "lladdr 02:00:00:00:00:09"},
		{AreaNeighbours, "eth0 10.0.0.2 lladdr 02:00:00:00:00:02", "", "dynamic"},
		{AreaFirewall, "iptables command", "not installed", "iptables-save"},
		{AreaFirewall, "iptables table nat", "", "present 2 times"},
		{AreaSysctls, "kernel.modprobe", "(empty)", ""},
		{AreaSysctls, "net.ipv4.ip_forward", "0", "1"},
		{AreaMounts, "/run/netns/x nsfs nsfs rw", "", "present 2 times"},
		{AreaCgroups, "pids/a/terway-lab-n1", "", "present"},
		{AreaProcesses, "pid 300 (kubelet)", "", "parent pid 1 (init) session 300 netns net:[5] cmd kubelet --v=2"},
		{AreaProcesses, "pid 7 (sleep)", "", "parent pid 1 (init) session 7 netns net:[1]"},
		{AreaProcesses, "pid 400 (other)", "", "parent pid 1 (init) session 400 netns net:[9]"},
		{AreaPaths, "/etc/eni", "", "dir"},
		{AreaPaths, "/etc/eni/eni.json", "", "file 3"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff:\n%s\nwant:\n%s", render(got), render(want))
	}

	ignoring := DiffOptions{IgnoreProcess: func(p Process) bool { return p.Comm == "kubelet" }}.Diff(before, after)
	for _, d := range ignoring {
		if strings.Contains(d.Item, "kubelet") || strings.Contains(d.After, "kubelet") {
			t.Errorf("ignored process still reported: %v", d)
		}
	}
	if len(ignoring) != len(want)-2 {
		t.Errorf("ignoring kubelet: %d differences, want %d:\n%s", len(ignoring), len(want)-2, render(ignoring))
	}
}

func TestDiffIgnoresVanishedDynamicNeighbours(t *testing.T) {
	before, after := synthetic(), synthetic()
	after.Network.DynamicNeighbours = map[string]string{}
	if ds := Diff(before, after); len(ds) != 0 {
		t.Fatalf("an expired dynamic neighbour is not a difference: %v", ds)
	}
}

// A busy machine's other cgroups come and go during a run; with
// OwnCgroup, only the lab's trees count, in both directions.
func TestDiffOwnCgroupJudgesOnlyOwnTrees(t *testing.T) {
	before, after := synthetic(), synthetic()
	before.Cgroups = map[string][]string{"memory": {"other", "lab.n1"}}
	after.Cgroups = map[string][]string{"memory": {"lab.n1", "lab.n1/pods", "newcomer"}}
	own := DiffOptions{OwnCgroup: func(rel string) bool { return strings.HasPrefix(rel, "lab.") }}
	ds := own.Diff(before, after)
	if len(ds) != 1 || ds[0].Item != "memory/lab.n1/pods" || ds[0].After != "present" {
		t.Fatalf("own cgroups only: want memory/lab.n1/pods present, got:\n%s", render(ds))
	}
	if all := Diff(before, after); len(all) != 3 {
		t.Fatalf("without OwnCgroup every cgroup counts: want 3 differences, got:\n%s", render(all))
	}
	after.Cgroups = map[string][]string{}
	if ds := own.Diff(before, after); len(ds) != 2 {
		t.Fatalf("a vanished hierarchy and own cgroup are differences: got:\n%s", render(ds))
	}
}

func TestDiffFlagsAnotherBoot(t *testing.T) {
	before, after := synthetic(), synthetic()
	after.BootID = "b2"
	ds := Diff(before, after)
	if len(ds) != 1 || ds[0].Area != AreaSnapshot {
		t.Fatalf("another boot: %v", ds)
	}
}

func TestSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "before.json")
	s := synthetic()
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if ds := Diff(s, loaded); len(ds) != 0 {
		t.Fatalf("saved and loaded differ: %v", ds)
	}
	s.Version = formatVersion + 1
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "format version") {
		t.Fatalf("another format version must be refused, got %v", err)
	}
}

func TestWriteDifferences(t *testing.T) {
	var b bytes.Buffer
	if err := WriteDifferences(&b, nil); err != nil || b.String() != "no differences\n" {
		t.Fatalf("empty: %q %v", b.String(), err)
	}
	b.Reset()
	d := Difference{Area: AreaLinks, Item: "veth1", After: "type veth"}
	if err := WriteDifferences(&b, []Difference{d}); err != nil || b.String() != "links: veth1: (absent) -> type veth\n" {
		t.Fatalf("one: %q %v", b.String(), err)
	}
}

func render(ds []Difference) string {
	var b bytes.Buffer
	_ = WriteDifferences(&b, ds)
	return b.String()
}
