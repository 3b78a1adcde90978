package cni

import (
	"net/netip"
	"time"
)

// Record is what the plugin recorded for one pod interface in its state
// directory: whose it is and which addresses the pod was given. The
// daemon reads these records when it restores what every pod holds: a
// record is written before the datapath is set up and removed only when
// DEL or GC has undone it, so an address in a record may be configured in
// a running pod whatever happened to the daemon's own store.
type Record struct {
	ContainerID string
	IfName      string
	Namespace   string
	Name        string
	// NetNS is the pod's network namespace path as the runtime gave it.
	NetNS     string
	IPv4      netip.Addr
	IPv6      netip.Addr
	CreatedAt time.Time
}

// ReadRecords reads every attachment record in the plugin's state
// directory dir (its state_dir). A missing directory holds none. Files
// that cannot be read are returned as errors next to the good records, so
// that one damaged file does not hide the others.
func ReadRecords(dir string) ([]Record, []error) {
	atts, errs := stateStore{dir: dir}.list()
	out := make([]Record, 0, len(atts))
	for _, a := range atts {
		out = append(out, Record{ContainerID: a.ContainerID, IfName: a.IfName, Namespace: a.Pod.Namespace,
			Name: a.Pod.Name, NetNS: a.Spec.PodNetNS, IPv4: a.Spec.IPv4, IPv6: a.Spec.IPv6, CreatedAt: a.CreatedAt})
	}
	return out, errs
}
