package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/cluster"
	"github.com/terway-sim/terway/lab/workload"
)

// Report is the demo's result.
type Report struct {
	Mode      mode.Mode `json:"mode"`
	Nodes     int       `json:"nodes"`
	Replicas  int       `json:"replicas"`
	UpSeconds float64   `json:"upSeconds"`
	// Cold and Warm are pod ready latencies (creation to Ready as the
	// watch saw it) of the first rollout and of the one after scaling to 0.
	Cold workload.Summary `json:"coldPool"`
	Warm workload.Summary `json:"warmPool"`
	// CNIAddCold and CNIAddWarm are ADD as the plugin measured it (from
	// its start to its result), per rollout.
	CNIAddCold workload.Summary `json:"cniAddCold"`
	CNIAddWarm workload.Summary `json:"cniAddWarm"`
	// CNIAddWarmPhases break CNIAddWarm down (addPhases but total): the
	// container lock, AllocIP, the node's datapath lock, the datapath.
	CNIAddWarmPhases map[string]workload.Summary `json:"cniAddWarmPhases,omitempty"`
	Connectivity     []workload.Check            `json:"connectivity"`
	// Calls are successful cloud API calls by action over both rollouts
	// (PodsStarted pods); Throttled and Failed count the others.
	Calls       map[string]int64 `json:"calls"`
	PodsStarted int              `json:"podsStarted"`
	Throttled   int64            `json:"throttled"`
	// Failed counts the other unsuccessful calls by "action: code".
	Failed    map[string]int64 `json:"failed"`
	Inventory []NodeInventory  `json:"inventory"`
	Memory    cluster.Memory   `json:"memoryMiB"`
	Audit     *audit.Report    `json:"audit,omitempty"`
}

// OK reports whether every connectivity check passed and the audit is
// clean.
func (r *Report) OK() bool {
	return len(r.Connectivity) > 0 && len(workload.Failed(r.Connectivity)) == 0 && r.Audit != nil && r.Audit.Clean()
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// rows are the report's figures as label/value pairs, shared by the text
// and Markdown renderings.
func (r *Report) rows() [][2]string {
	lat := func(s workload.Summary) string {
		return fmt.Sprintf("p50 %s, p90 %s, p99 %s (n=%d)", ms(s.P50), ms(s.P90), ms(s.P99), s.Count)
	}
	rows := [][2]string{
		{"mode / nodes / pods", fmt.Sprintf("%s / %d / %d", r.Mode, r.Nodes, r.Replicas)},
		{"lab up (to Ready)", fmt.Sprintf("%.1f s", r.UpSeconds)},
		{"pod ready, cold pool", lat(r.Cold)},
		{"pod ready, warm pool", lat(r.Warm)},
		{"CNI ADD (plugin side), cold pool", lat(r.CNIAddCold)},
		{"CNI ADD (plugin side), warm pool", lat(r.CNIAddWarm)},
		{"CNI ADD, warm pool, by part (p50 / p99)", r.addBreakdown()},
		{"connectivity", r.connectivitySummary()},
	}
	actions := make([]string, 0, len(r.Calls))
	for a := range r.Calls {
		actions = append(actions, a)
	}
	sort.Strings(actions)
	var calls []string
	for _, a := range actions {
		calls = append(calls, fmt.Sprintf("%s %d (%.2f/pod)", a, r.Calls[a], float64(r.Calls[a])/float64(max(r.PodsStarted, 1))))
	}
	rows = append(rows, [2]string{"cloud calls over " + fmt.Sprint(r.PodsStarted) + " pod starts", strings.Join(calls, "; ")},
		[2]string{"throttled calls", fmt.Sprint(r.Throttled)},
		[2]string{"other failed calls", failedSummary(r.Failed)})
	for _, inv := range r.Inventory {
		rows = append(rows, [2]string{"in use on " + inv.Node, fmt.Sprintf("%d pods, %d secondary ENIs, %d usable IPs", inv.Pods, inv.ENIs, inv.IPs)})
	}
	rows = append(rows, [2]string{"memory, control plane", r.memoryControlPlane()})
	for _, n := range sortedKeys(r.Memory.Nodes) {
		rows = append(rows, [2]string{"memory, node " + n, fmt.Sprintf("%.0f MiB", r.Memory.Nodes[n])})
	}
	auditRes := "not run"
	if r.Audit != nil {
		auditRes = "clean"
		if !r.Audit.Clean() {
			auditRes = fmt.Sprintf("%d finding(s): %v", len(r.Audit.Findings), r.Audit.Kinds())
		}
	}
	return append(rows, [2]string{"audit", auditRes})
}

func failedSummary(m map[string]int64) string {
	if len(m) == 0 {
		return "0"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, "; ")
}

func (r *Report) connectivitySummary() string {
	byKind := map[workload.CheckKind][2]int{}
	for _, c := range r.Connectivity {
		v := byKind[c.Kind]
		v[1]++
		if c.OK {
			v[0]++
		}
		byKind[c.Kind] = v
	}
	var parts []string
	for _, k := range []workload.CheckKind{workload.KindSameNode, workload.KindCrossNode, workload.KindService} {
		v := byKind[k]
		parts = append(parts, fmt.Sprintf("%s %d/%d", k, v[0], v[1]))
	}
	return strings.Join(parts, ", ")
}

func (r *Report) memoryControlPlane() string {
	var parts []string
	for _, k := range sortedKeys(r.Memory.ControlPlane) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, r.Memory.ControlPlane[k]))
	}
	return fmt.Sprintf("%.0f MiB (%s)", r.Memory.ControlPlaneTotal(), strings.Join(parts, ", "))
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// verdict is pass as the writer spells it, or FAIL when the demo failed.
func (r *Report) verdict(pass string) string {
	if !r.OK() {
		return "FAIL"
	}
	return pass
}

// WriteText writes the report for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "demo report: %s\n", r.verdict("PASS"))
	for _, row := range r.rows() {
		fmt.Fprintf(&b, "  %-34s %s\n", row[0], row[1])
	}
	for _, c := range workload.Failed(r.Connectivity) {
		fmt.Fprintf(&b, "  failed: %s\n", c)
	}
	if r.Audit != nil && !r.Audit.Clean() {
		_ = r.Audit.WriteText(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown writes the report as a Markdown table.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# terway-lab demo (%s): %s\n\n| figure | value |\n|---|---|\n", r.Mode, r.verdict("pass"))
	for _, row := range r.rows() {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], strings.ReplaceAll(row[1], "|", "\\|"))
	}
	for _, c := range workload.Failed(r.Connectivity) {
		fmt.Fprintf(&b, "\n- failed: %s", c)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// addBreakdown renders CNIAddWarmPhases: where a warm ADD's time goes.
func (r *Report) addBreakdown() string {
	if len(r.CNIAddWarmPhases) == 0 {
		return "—"
	}
	names := map[string]string{"lockWait": "container lock", "alloc": "AllocIP",
		"datapathLockWait": "datapath lock", "datapath": "datapath setup"}
	var parts []string
	for _, k := range addPhases[1:] {
		s := r.CNIAddWarmPhases[k]
		parts = append(parts, fmt.Sprintf("%s %s / %s", names[k], ms(s.P50), ms(s.P99)))
	}
	return strings.Join(parts, "; ")
}
