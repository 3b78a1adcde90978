package hostcheck

import (
	"fmt"
	"io"
	"maps"
	"slices"
)

// Areas of a Difference, in the order Diff reports them.
const (
	// AreaSnapshot: the two snapshots are not of one boot or one root
	// network namespace; other differences may follow from that.
	AreaSnapshot   = "snapshot"
	AreaNamespaces = "namespaces"
	AreaLinks      = "links"
	AreaAddresses  = "addresses"
	AreaRules      = "rules"
	AreaRoutes     = "routes"
	AreaNeighbours = "neighbours"
	AreaFirewall   = "firewall"
	AreaSysctls    = "sysctls"
	AreaMounts     = "mounts"
	AreaCgroups    = "cgroups"
	AreaProcesses  = "processes"
	AreaPaths      = "paths"
)

// Difference is one item that is not as before. Before or After is empty
// when the item did not exist then (an existing empty value reads
// "(empty)").
type Difference struct {
	Area   string `json:"area"`
	Item   string `json:"item"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
}

// String renders the difference on one line.
func (d Difference) String() string {
	show := func(s string) string {
		if s == "" {
			return "(absent)"
		}
		return s
	}
	return fmt.Sprintf("%s: %s: %s -> %s", d.Area, d.Item, show(d.Before), show(d.After))
}

// WriteDifferences prints the differences one per line, or a line saying
// there are none.
func WriteDifferences(w io.Writer, ds []Difference) error {
	if len(ds) == 0 {
		_, err := fmt.Fprintln(w, "no differences")
		return err
	}
	for _, d := range ds {
		if _, err := fmt.Fprintln(w, d.String()); err != nil {
			return err
		}
	}
	return nil
}

// DiffOptions adjust Diff.
type DiffOptions struct {
	// IgnoreProcess, when set, drops the new processes it returns true
	// for, also as holders of new namespaces: on a shared machine, the
	// work of others.
	IgnoreProcess func(Process) bool
	// OwnCgroup, when set, limits the cgroup comparison to the cgroups it
	// returns true for (rel is the cgroup's path below its hierarchy,
	// e.g. "terway-lab.lab-1/pods"): on a busy machine others create and
	// remove cgroups of their own while the lab runs, and only the lab's
	// own trees say whether the lab cleaned up. Hierarchies themselves
	// are always compared.
	OwnCgroup func(rel string) bool
}

// Diff lists what differs between before and after (see the package doc
// for what each area compares), in area order, items sorted. The process
// that took after and its descendants are never reported, so take after
// from a process that did not start the lab (the `down` command), or
// once it has reaped every child it started for the lab.
func Diff(before, after *Snapshot) []Difference { return DiffOptions{}.Diff(before, after) }

// Diff lists what differs between before and after.
func (o DiffOptions) Diff(before, after *Snapshot) []Difference {
	b, a := before, after
	ds := diffMeta(b, a)
	ds = append(ds, compareMaps(AreaNamespaces, "", b.NetNSFiles, a.NetNSFiles)...)
	ds = append(ds, o.newNamespaces(b, a)...)
	ds = append(ds, compareMaps(AreaLinks, "", b.Network.Links, a.Network.Links)...)
	ds = append(ds, compareMaps(AreaAddresses, "", b.Network.Addresses, a.Network.Addresses)...)
	ds = append(ds, compareMaps(AreaRules, "", b.Network.Rules, a.Network.Rules)...)
	ds = append(ds, compareMaps(AreaRoutes, "", b.Network.Routes, a.Network.Routes)...)
	ds = append(ds, diffNeighbours(b.Network, a.Network)...)
	ds = append(ds, diffFirewall(b.Firewall, a.Firewall)...)
	ds = append(ds, compareMaps(AreaSysctls, "", b.Sysctls, a.Sysctls)...)
	ds = append(ds, compareCounts(AreaMounts, "", b.Mounts, a.Mounts)...)
	ds = append(ds, compareMaps(AreaCgroups, "", o.cgroupSet(b.Cgroups), o.cgroupSet(a.Cgroups))...)
	ds = append(ds, o.newProcesses(b, a)...)
	return append(ds, diffPaths(b.Paths, a.Paths)...)
}

func diffMeta(b, a *Snapshot) []Difference {
	var ds []Difference
	if b.BootID != a.BootID {
		ds = append(ds, Difference{Area: AreaSnapshot, Item: "boot id", Before: b.BootID, After: a.BootID})
	}
	if b.RootNetNS != a.RootNetNS {
		ds = append(ds, Difference{Area: AreaSnapshot, Item: "root network namespace",
			Before: b.RootNetNS, After: a.RootNetNS})
	}
	return ds
}

// compareMaps reports keys whose values differ, appear or disappear.
func compareMaps(area, prefix string, before, after map[string]string) []Difference {
	var ds []Difference
	for _, k := range unionKeys(before, after) {
		bv, inB := before[k]
		av, inA := after[k]
		if inB && inA && bv == av {
			continue
		}
		ds = append(ds, Difference{Area: area, Item: prefix + k, Before: present(bv, inB), After: present(av, inA)})
	}
	return ds
}

// compareCounts reports multiset members whose count changed.
func compareCounts(area, prefix string, before, after map[string]int) []Difference {
	var ds []Difference
	for _, k := range unionKeys(before, after) {
		if before[k] != after[k] {
			ds = append(ds, Difference{Area: area, Item: prefix + k, Before: count(before[k]), After: count(after[k])})
		}
	}
	return ds
}

func unionKeys[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func present(v string, ok bool) string {
	switch {
	case !ok:
		return ""
	case v == "":
		return "(empty)"
	}
	return v
}

func count(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return "present"
	}
	return fmt.Sprintf("present %d times", n)
}

// diffNeighbours compares permanent entries strictly and reports dynamic
// entries (device, address, MAC) that appeared; the kernel expires
// dynamic entries on its own, so their disappearance is not reported.
func diffNeighbours(b, a Network) []Difference {
	ds := compareMaps(AreaNeighbours, "", b.Neighbours, a.Neighbours)
	for _, k := range unionKeys(nil, a.DynamicNeighbours) {
		if _, ok := b.DynamicNeighbours[k]; !ok {
			ds = append(ds, Difference{Area: AreaNeighbours, Item: k, After: a.DynamicNeighbours[k]})
		}
	}
	return ds
}

func diffFirewall(b, a map[string]Dump) []Difference {
	var ds []Difference
	for _, fam := range unionKeys(b, a) {
		if bs, as := dumpState(b[fam]), dumpState(a[fam]); bs != as {
			ds = append(ds, Difference{Area: AreaFirewall, Item: fam + " command", Before: bs, After: as})
		}
		ds = append(ds, compareCounts(AreaFirewall, fam+" ", lineCounts(b[fam].Lines), lineCounts(a[fam].Lines))...)
	}
	return ds
}

func dumpState(d Dump) string {
	switch {
	case d.Absent:
		return "not installed"
	case d.Command == "":
		return "" // the family was not in that snapshot
	case d.Error != "":
		return d.Command + " failed: " + d.Error
	}
	return d.Command
}

func lineCounts(lines []string) map[string]int {
	m := map[string]int{}
	for _, l := range lines {
		m[l]++
	}
	return m
}

func (o DiffOptions) cgroupSet(c map[string][]string) map[string]string {
	m := map[string]string{}
	for h, dirs := range c {
		m[h] = "hierarchy"
		for _, d := range dirs {
			if o.OwnCgroup != nil && !o.OwnCgroup(d) {
				continue
			}
			m[h+"/"+d] = "present"
		}
	}
	return m
}

func diffPaths(b, a map[string]PathState) []Difference {
	var ds []Difference
	for _, p := range unionKeys(b, a) {
		bs, as := b[p], a[p]
		if bs.Kind != as.Kind {
			ds = append(ds, Difference{Area: AreaPaths, Item: p, Before: bs.Kind, After: as.Kind})
		}
		ds = append(ds, compareMaps(AreaPaths, p+"/", bs.Entries, as.Entries)...)
	}
	return ds
}
