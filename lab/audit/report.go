package audit

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/terway-sim/terway/daemon/mode"
)

// Kind names what a finding is about.
type Kind string

// Finding kinds. Each is one way the sources disagree; see the package doc
// for the exact rule behind each.
const (
	// KindSourceError: a source could not be read; the checks that need it
	// were skipped for the node (or for all nodes, for the cloud and the
	// API server).
	KindSourceError Kind = "source-error"
	// KindLeakedIP: an address on an ENI of a lab instance that no pod
	// holds, no store attachment records and the daemon's pool does not
	// know.
	KindLeakedIP Kind = "leaked-ip"
	// KindMissingIP: the store gives a pod an address the cloud does not
	// have on that node's ENIs (or, in VPC mode, outside the node podCIDR).
	KindMissingIP Kind = "missing-ip"
	// KindDuplicateIP: two pods hold the same address.
	KindDuplicateIP Kind = "duplicate-ip"
	// KindStoreOrphan: a store attachment for a pod that does not exist,
	// has another UID, runs on another node or has finished (a sticky
	// reservation within its time is not one).
	KindStoreOrphan Kind = "store-orphan"
	// KindMissingAttachment: a running pod on a terway node without a
	// store attachment.
	KindMissingAttachment Kind = "missing-attachment"
	// KindIPMismatch: the pod's status IPs differ from the store's.
	KindIPMismatch Kind = "ip-mismatch"
	// KindPoolMismatch: the daemon's pool says a pod holds an address the
	// store does not record for it.
	KindPoolMismatch Kind = "pool-mismatch"
	// KindStaleRule: a per-pod policy rule for an address no live pod of
	// the node holds, or naming a vanished interface.
	KindStaleRule Kind = "stale-rule"
	// KindStaleRoute: a host route to a pod address no live pod holds, or
	// through a link that is not the pod's veth.
	KindStaleRoute Kind = "stale-route"
	// KindStaleNeighbour: a neighbour entry for a pod address no live pod
	// holds (on a pod veth, or permanent anywhere).
	KindStaleNeighbour Kind = "stale-neighbour"
	// KindStaleVeth: a host-side pod veth of no live pod, or a retired one
	// the reaper has not deleted.
	KindStaleVeth Kind = "stale-veth"
	// KindStaleTC: a qdisc or filter the plugin would have made on a link
	// that is not a live pod's veth, or redirecting to a vanished link.
	KindStaleTC Kind = "stale-tc"
	// KindStaleLink: an ENI link in the node that the cloud does not attach
	// to it, or that still carries the alias of a pod it was moved into.
	KindStaleLink Kind = "stale-link"
	// KindMissingDatapath: a live pod whose host route or rules are
	// missing.
	KindMissingDatapath Kind = "missing-datapath"
	// KindOrphanENI: an ENI in a lab vSwitch that is Available, untagged,
	// tagged for another cluster, or tagged for an instance other than
	// its attachment.
	KindOrphanENI Kind = "orphan-eni"
	// KindUnknownENI: an ENI attached to a node that its daemon's pool and
	// store do not know.
	KindUnknownENI Kind = "unknown-eni"
	// KindMissingENILink: an ENI the cloud attaches to a node that is
	// neither a link in the node nor held by an exclusive-ENI pod.
	KindMissingENILink Kind = "missing-eni-link"
	// KindNodeMismatch: a lab node missing from the API server, or whose
	// providerID names another instance.
	KindNodeMismatch Kind = "node-mismatch"
	// KindLeakedEIP: an EIP a node's daemon allocated, or bound to an
	// address of a node's ENI, that no attachment of the node records.
	KindLeakedEIP Kind = "leaked-eip"
	// KindMissingEIP: an EIP a store records that the cloud does not have.
	KindMissingEIP Kind = "missing-eip"
	// KindEIPMismatch: a recorded EIP the cloud has unbound, or bound to
	// another address than the record's pod's.
	KindEIPMismatch Kind = "eip-mismatch"
	// KindDuplicateEIP: one EIP recorded for two pods.
	KindDuplicateEIP Kind = "duplicate-eip"
)

// Source names one of the audit's inputs.
type Source string

// The sources.
const (
	// SourceCloud is fakecloud's world (admin API).
	SourceCloud Source = "cloud"
	// SourceKube is the API server's pods and nodes.
	SourceKube Source = "kube"
	// SourceStore is a daemon's store records, asked over its socket.
	SourceStore Source = "store"
	// SourcePool is a daemon's pool as its tracing API lists it.
	SourcePool Source = "pool"
	// SourceNetNS is a node's network namespace.
	SourceNetNS Source = "netns"
)

// Finding is one disagreement between sources.
type Finding struct {
	Kind Kind `json:"kind"`
	// Node is the lab node's name; empty for cloud-wide findings.
	Node string `json:"node,omitempty"`
	// Object names what is wrong ("ip 192.168.0.7 on eni-x", "rule 512
	// \"to 192.168.0.7 lookup main\"").
	Object string `json:"object"`
	// Detail says what each source shows.
	Detail string `json:"detail"`
	// Sources are the sources the finding compares.
	Sources []Source `json:"sources"`
}

// Counts are what the audit read, per source. Per node they are that
// node's; in Report.Counts the sums (cloud-wide figures included once).
type Counts struct {
	// Cloud: lab instances found, ENIs attached to them, their IPv4
	// addresses (primaries of secondary ENIs included, the node's own
	// primary IP not) and IPv6 addresses; Available ENIs in lab vSwitches
	// (report totals only).
	Instances     int `json:"instances"`
	ENIs          int `json:"enis"`
	IPv4          int `json:"ipv4"`
	IPv6          int `json:"ipv6"`
	AvailableENIs int `json:"availableEnis"`
	// EIPs the node's daemon allocated or bound to its ENIs' addresses.
	EIPs int `json:"eips"`
	// API server: pods (not hostNetwork) on the node, those running.
	Pods        int `json:"pods"`
	RunningPods int `json:"runningPods"`
	// Store: attachments, those that are sticky reservations, intents.
	Attachments int `json:"attachments"`
	Reserved    int `json:"reserved"`
	Intents     int `json:"intents"`
	// Pool: addresses listed, idle ones, in use, in flight.
	PoolAddresses int `json:"poolAddresses"`
	PoolIdle      int `json:"poolIdle"`
	PoolInUse     int `json:"poolInUse"`
	PoolInflight  int `json:"poolInflight"`
	// IdleUnverified are addresses on the daemon's ENIs that no pod or
	// attachment holds, taken for idle pool addresses without a pool
	// view to confirm it (Socket not given).
	IdleUnverified int `json:"idleUnverified"`
	// InFlight are unheld addresses and Available ENIs skipped because
	// the daemon had cloud operations in flight.
	InFlight int `json:"inFlight"`
	// Network namespace.
	Links      int `json:"links"`
	PodVeths   int `json:"podVeths"`
	Addresses  int `json:"addresses"`
	Rules      int `json:"rules"`
	Routes     int `json:"routes"`
	Neighbours int `json:"neighbours"`
	Qdiscs     int `json:"qdiscs"`
	Filters    int `json:"filters"`
}

// add sums o into c.
func (c *Counts) add(o Counts) {
	c.Instances += o.Instances
	c.ENIs += o.ENIs
	c.IPv4 += o.IPv4
	c.IPv6 += o.IPv6
	c.EIPs += o.EIPs
	c.Pods += o.Pods
	c.RunningPods += o.RunningPods
	c.Attachments += o.Attachments
	c.Reserved += o.Reserved
	c.Intents += o.Intents
	c.PoolAddresses += o.PoolAddresses
	c.PoolIdle += o.PoolIdle
	c.PoolInUse += o.PoolInUse
	c.PoolInflight += o.PoolInflight
	c.IdleUnverified += o.IdleUnverified
	c.InFlight += o.InFlight
	c.Links += o.Links
	c.PodVeths += o.PodVeths
	c.Addresses += o.Addresses
	c.Rules += o.Rules
	c.Routes += o.Routes
	c.Neighbours += o.Neighbours
	c.Qdiscs += o.Qdiscs
	c.Filters += o.Filters
}

// NodeReport is one node's counts.
type NodeReport struct {
	Name       string `json:"name"`
	InstanceID string `json:"instanceId"`
	Counts     Counts `json:"counts"`
}

// Report is the audit's result.
type Report struct {
	Time     time.Time    `json:"time"`
	Mode     mode.Mode    `json:"mode"`
	Counts   Counts       `json:"counts"`
	Nodes    []NodeReport `json:"nodes"`
	Findings []Finding    `json:"findings"`
	// Notes say what the audit could not verify (no effect on Clean).
	Notes []string `json:"notes,omitempty"`
}

// Clean reports whether the audit found nothing.
func (r *Report) Clean() bool { return len(r.Findings) == 0 }

// Kinds lists the kinds found, sorted, each once.
func (r *Report) Kinds() []Kind {
	seen := map[Kind]bool{}
	var out []Kind
	for _, f := range r.Findings {
		if !seen[f.Kind] {
			seen[f.Kind] = true
			out = append(out, f.Kind)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// sortFindings orders findings by node, kind and object, so that reports
// of the same state compare equal.
func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Object < b.Object
	})
}

// WriteText prints the report for people: a verdict, counts per node,
// then one line per finding and the notes.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	verdict := "clean"
	if !r.Clean() {
		verdict = fmt.Sprintf("%d finding(s)", len(r.Findings))
	}
	fmt.Fprintf(tw, "audit (%s, %d node(s), %s): %s\n", r.Mode, len(r.Nodes), r.Time.Format(time.RFC3339), verdict)
	c := r.Counts
	fmt.Fprintf(tw, "cloud: %d instance(s), %d ENI(s), %d IPv4, %d IPv6, %d EIP(s), %d Available ENI(s) in lab vSwitches\n",
		c.Instances, c.ENIs, c.IPv4, c.IPv6, c.EIPs, c.AvailableENIs)
	for _, n := range r.Nodes {
		writeNodeCounts(tw, n)
	}
	if len(r.Findings) > 0 {
		fmt.Fprintln(tw, "findings:")
		for _, f := range r.Findings {
			node := f.Node
			if node == "" {
				node = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t[%s]\n", f.Kind, node, f.Object, f.Detail, joinSources(f.Sources))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "note: %s\n", n)
	}
	return tw.Flush()
}

func writeNodeCounts(w io.Writer, n NodeReport) {
	c := n.Counts
	fmt.Fprintf(w, "node %s (%s): cloud %d ENI(s) %d IPv4 %d IPv6 %d EIP(s); api %d pod(s) (%d running); "+
		"store %d attachment(s) (%d reserved, %d intent(s)); pool %d address(es) (%d idle, %d in use, %d in flight); "+
		"netns %d link(s) (%d pod veth(s)), %d addr, %d rule(s), %d route(s), %d neigh, %d qdisc(s), %d filter(s)\n",
		n.Name, n.InstanceID, c.ENIs, c.IPv4, c.IPv6, c.EIPs, c.Pods, c.RunningPods,
		c.Attachments, c.Reserved, c.Intents, c.PoolAddresses, c.PoolIdle, c.PoolInUse, c.PoolInflight,
		c.Links, c.PodVeths, c.Addresses, c.Rules, c.Routes, c.Neighbours, c.Qdiscs, c.Filters)
}

func joinSources(ss []Source) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	return strings.Join(parts, ",")
}
