package audit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
)

// DefaultVethPrefix is the CNI plugin's default host veth prefix
// (veth_prefix, Terway's "cali").
const DefaultVethPrefix = "cali"

// NodeInput locates one lab node's parts on this machine.
type NodeInput struct {
	// Name is the Kubernetes node name.
	Name string
	// InstanceID is the node's ECS instance.
	InstanceID string
	// NetNS is the path of the node's network namespace file.
	NetNS string
	// StorePath is the daemon's bbolt store as seen from here (for a lab
	// node <Root>/var/lib/cni/terway/ResRelation.db).
	StorePath string
	// Socket is the daemon's gRPC socket as seen from here (for a lab
	// node <Root>/run/eni/eni.socket). Optional: only the daemon's pool
	// knows its idle addresses, so without it addresses on the daemon's
	// ENIs that nobody holds are counted as unverified idle rather than
	// judged (see the package doc).
	Socket string
}

// Input is what Run audits.
type Input struct {
	// FakecloudURL is fakecloud's API endpoint reachable from here;
	// AdminToken its admin token.
	FakecloudURL, AdminToken string
	// HTTPClient reaches fakecloud; nil means a client with a 10 s
	// timeout.
	HTTPClient *http.Client
	// Kube is the API server.
	Kube  kubernetes.Interface
	Nodes []NodeInput
	// Mode is the daemons' mode; empty means mode.Default (ENIMultiIP).
	Mode mode.Mode
	// VethPrefix is the plugin's veth_prefix; empty means
	// DefaultVethPrefix.
	VethPrefix string
	// ClusterID is the daemons' cluster_id. Optional: when set, an ENI
	// tagged for another cluster is an orphan.
	ClusterID string
	// Now is the clock sticky reservations are judged by; nil means
	// time.Now.
	Now func() time.Time
}

func (in *Input) validate() error {
	if in.Mode == "" {
		in.Mode = mode.Default
	}
	if _, err := mode.Parse(string(in.Mode)); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if in.FakecloudURL == "" || in.Kube == nil {
		return errors.New("audit: FakecloudURL and Kube are required")
	}
	seen := map[string]bool{}
	for _, n := range in.Nodes {
		if n.Name == "" || n.InstanceID == "" {
			return fmt.Errorf("audit: node %+v lacks a name or an instance ID", n)
		}
		if seen[n.Name] || seen[n.InstanceID] {
			return fmt.Errorf("audit: node %s (%s) given twice", n.Name, n.InstanceID)
		}
		seen[n.Name], seen[n.InstanceID] = true, true
	}
	if in.HTTPClient == nil {
		in.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if in.VethPrefix == "" {
		in.VethPrefix = DefaultVethPrefix
	}
	if in.Now == nil {
		in.Now = time.Now
	}
	return nil
}

// Run reads the four sources (and each daemon's pool, when its socket is
// given) and reports every disagreement. A source that cannot be read is
// a KindSourceError finding, and the checks that need it are skipped; the
// error is only for an invalid Input.
func Run(ctx context.Context, in Input) (*Report, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	s := gather(ctx, &in)
	return analyze(s), nil
}

// RunUntilClean runs the audit until it is clean or within has passed,
// and returns the last report. The audit is a snapshot: an allocation or
// release in flight can show as a finding for a moment, and a real leak
// stays.
func RunUntilClean(ctx context.Context, in Input, within time.Duration) (*Report, error) {
	deadline := time.Now().Add(within)
	for {
		r, err := Run(ctx, in)
		if err != nil || r.Clean() || time.Now().After(deadline) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// snapshot is everything the audit read.
type snapshot struct {
	mode       mode.Mode
	vethPrefix string
	clusterID  string
	now        time.Time
	world      *admin.WorldView // nil: unreadable
	kube       *kubeView        // nil: unreadable
	nodes      []*nodeSnap
	// errs are the source errors, as findings.
	errs []Finding
}

// nodeSnap is what was read for one node; nil parts were unreadable (or,
// for the pool, not asked for).
type nodeSnap struct {
	in    NodeInput
	store *storeView
	pool  *poolView
	net   *netView
}

// gather reads the sources. The pool is read before and after the cloud:
// an address released in between is in the first read (still listed as
// releasing) and one assigned in between is in the second (or counted
// in flight), so a change racing the audit is not taken for a leak.
func gather(ctx context.Context, in *Input) *snapshot {
	s := &snapshot{mode: in.Mode, vethPrefix: in.VethPrefix, clusterID: in.ClusterID, now: in.Now()}
	poolErrs := map[string]error{}
	for _, n := range in.Nodes {
		ns := &nodeSnap{in: n}
		s.nodes = append(s.nodes, ns)
		if n.Socket != "" {
			ns.pool, poolErrs[n.Name] = readPool(ctx, n.Socket)
		}
	}
	for _, ns := range s.nodes {
		var err error
		if ns.store, err = readStore(ctx, ns.in.StorePath); err != nil {
			s.sourceError(ns.in.Name, SourceStore, "store "+ns.in.StorePath, err)
		}
	}
	var err error
	if s.kube, err = readKube(ctx, in.Kube, in.Nodes); err != nil {
		s.sourceError("", SourceKube, "API server", err)
	}
	if s.world, err = readWorld(ctx, in.HTTPClient, in.FakecloudURL, in.AdminToken); err != nil {
		s.sourceError("", SourceCloud, "fakecloud "+in.FakecloudURL, err)
	}
	for _, ns := range s.nodes {
		if ns.net, err = readNetNS(ns.in.NetNS); err != nil {
			s.sourceError(ns.in.Name, SourceNetNS, "netns "+ns.in.NetNS, err)
		}
		if ns.in.Socket == "" {
			continue
		}
		second, err := readPool(ctx, ns.in.Socket)
		if err == nil && poolErrs[ns.in.Name] == nil {
			ns.pool = ns.pool.merge(second)
			continue
		}
		// A pool read only once cannot cover the window around the cloud
		// read: treat it as unreadable rather than risk false leaks.
		ns.pool = nil
		s.sourceError(ns.in.Name, SourcePool, "pool via "+ns.in.Socket, errors.Join(poolErrs[ns.in.Name], err))
	}
	return s
}

func (s *snapshot) sourceError(node string, src Source, object string, err error) {
	s.errs = append(s.errs, Finding{Kind: KindSourceError, Node: node, Object: object, Detail: err.Error(),
		Sources: []Source{src}})
}
