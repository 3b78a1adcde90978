package demo

import (
	"bufio"
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/cluster"
	"github.com/terway-sim/terway/lab/workload"
)

// NodeInventory is what one node holds in the cloud against its pods,
// taken while the workload runs.
type NodeInventory struct {
	Node string `json:"node"`
	Pods int    `json:"pods"`
	// ENIs are the node's secondary ENIs; IPs the IPv4 addresses on them
	// (ENIOnly: each ENI's primary address, the pod's; ENIMultiIP: primary
	// and secondary addresses, all of which Terway hands to pods).
	ENIs int `json:"enis"`
	IPs  int `json:"ips"`
}

// inventory records ENIs and addresses in use against running pods.
func (d *run) inventory(ctx context.Context) error {
	w, err := d.admin.World(ctx)
	if err != nil {
		return err
	}
	pods, err := d.w.Pods(ctx)
	if err != nil {
		return err
	}
	perNode := map[string]int{}
	for _, p := range pods {
		if workload.IsReady(&p) {
			perNode[p.Spec.NodeName]++
		}
	}
	for _, n := range d.o.State.Nodes {
		inv := NodeInventory{Node: n.Name, Pods: perNode[n.Name]}
		for _, e := range w.ENIs {
			if e.InstanceID != n.InstanceID || e.Type == "Primary" {
				continue
			}
			inv.ENIs++
			if d.o.State.Mode == mode.ENIOnly {
				inv.IPs++
			} else {
				inv.IPs += 1 + len(e.IPv4)
			}
		}
		d.r.Inventory = append(d.r.Inventory, inv)
	}
	return nil
}

// calls records cloud API calls by action since the demo began.
func (d *run) calls(ctx context.Context) error {
	stats, err := d.admin.Calls(ctx)
	if err != nil {
		return err
	}
	d.r.Calls, d.r.Failed = map[string]int64{}, map[string]int64{}
	for _, s := range stats {
		if s.Outcome == admin.OutcomeSuccess {
			d.r.Calls[s.Action] += s.Count
		} else if strings.HasPrefix(s.Outcome, "Throttling") {
			d.r.Throttled += s.Count
		} else {
			d.r.Failed[s.Action+": "+s.Outcome] += s.Count
		}
	}
	d.r.PodsStarted = 2 * d.o.Replicas
	return nil
}

// cniLogMarks remembers how far each node's CNI log was written, so that
// only this demo's ADDs are counted.
func cniLogMarks(st *cluster.State) map[string]int64 {
	m := map[string]int64{}
	for _, n := range st.Nodes {
		if fi, err := os.Stat(n.HostPath(cluster.CNILogPath)); err == nil {
			m[n.Name] = fi.Size()
		}
	}
	return m
}

// addPhases are the fields of the plugin's "pod network set up" line
// that measure an ADD: total (invocation to result) and its parts.
var addPhases = []string{"total", "lockWait", "alloc", "datapathLockWait", "datapath"}

// cniAddLatencies reads the plugin's own measure of each successful ADD
// (addPhases) from every node's CNI log, each sorted.
func cniAddLatencies(st *cluster.State, marks map[string]int64) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	for _, n := range st.Nodes {
		f, err := os.Open(n.HostPath(cluster.CNILogPath))
		if err != nil {
			continue
		}
		if _, err := f.Seek(marks[n.Name], 0); err == nil {
			for k, v := range parseAddPhases(f) {
				out[k] = append(out[k], v...)
			}
		}
		f.Close()
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// parseAddPhases finds the addPhases fields (durations) on the plugin's
// "pod network set up" lines (slog text format).
func parseAddPhases(f io.Reader) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `msg="pod network set up"`) {
			continue
		}
		for _, field := range strings.Fields(line) {
			k, v, ok := strings.Cut(field, "=")
			if !ok || !slices.Contains(addPhases, k) {
				continue
			}
			if d, err := time.ParseDuration(v); err == nil {
				out[k] = append(out[k], d)
			}
		}
	}
	return out
}
