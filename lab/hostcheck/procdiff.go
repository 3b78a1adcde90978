package hostcheck

import (
	"fmt"
	"slices"
	"strings"
)

// maxHolders bounds the processes named for one new namespace.
const maxHolders = 5

// procTree indexes the processes of one snapshot.
type procTree struct {
	s     *Snapshot
	byPID map[int]Process
}

func newProcTree(s *Snapshot) procTree {
	t := procTree{s: s, byPID: make(map[int]Process, len(s.Processes))}
	for _, p := range s.Processes {
		t.byPID[p.PID] = p
	}
	return t
}

// fromTaker reports whether p is the snapshot's taker or descends from
// it: a `down` command's own children are not leftovers.
func (t procTree) fromTaker(p Process) bool {
	for range len(t.byPID) + 1 { // a PPID cycle cannot happen, but bound the walk
		if p.same(t.s.Taker) {
			return true
		}
		parent, ok := t.byPID[p.PPID]
		if !ok || p.PPID == 0 {
			return false
		}
		p = parent
	}
	return false
}

func (t procTree) describe(p Process) string {
	parent := fmt.Sprintf("pid %d", p.PPID)
	if pp, ok := t.byPID[p.PPID]; ok {
		parent = pp.String()
	}
	return words("parent "+parent, fmt.Sprintf("session %d", p.SID), opt("netns", p.NetNS, p.NetNS != ""),
		opt("cmd", p.Cmdline, p.Cmdline != ""))
}

// counted reports whether a process of after takes part in the
// comparison.
func (o DiffOptions) counted(t procTree, p Process) bool {
	return !t.fromTaker(p) && (o.IgnoreProcess == nil || !o.IgnoreProcess(p))
}

// newProcesses reports the processes of after that were not in before:
// leftovers. Processes that exited are not reported.
func (o DiffOptions) newProcesses(before, after *Snapshot) []Difference {
	old := make(map[Process]bool, len(before.Processes))
	for _, p := range before.Processes {
		old[identity(p)] = true
	}
	t := newProcTree(after)
	var ds []Difference
	for _, p := range after.Processes {
		if old[identity(p)] || !o.counted(t, p) {
			continue
		}
		ds = append(ds, Difference{Area: AreaProcesses, Item: p.String(), After: t.describe(p)})
	}
	return ds
}

func identity(p Process) Process { return Process{PID: p.PID, Start: p.Start} }

// newNamespaces reports network namespaces that processes of after are
// in and that no process was in, and no namespace file held, before.
func (o DiffOptions) newNamespaces(before, after *Snapshot) []Difference {
	known := map[string]bool{before.RootNetNS: true, after.RootNetNS: true}
	for _, p := range before.Processes {
		known[p.NetNS] = true
	}
	for _, v := range before.NetNSFiles {
		known[v] = true
	}
	t := newProcTree(after)
	held := map[string][]string{}
	for _, p := range after.Processes {
		if p.NetNS != "" && !known[p.NetNS] && o.counted(t, p) {
			held[p.NetNS] = append(held[p.NetNS], p.String())
		}
	}
	var ds []Difference
	for _, ns := range unionKeys(nil, held) {
		ds = append(ds, Difference{Area: AreaNamespaces, Item: ns, After: "held by " + listSome(held[ns])})
	}
	return ds
}

func listSome(items []string) string {
	slices.Sort(items)
	if len(items) <= maxHolders {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxHolders], ", "), len(items)-maxHolders)
}
