package audit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc"
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
	// Socket is the daemon's gRPC socket as seen from here (for a lab
	// node <Root>/run/eni/eni.socket). The daemon answers its store's
	// records (attachments, intents) and its pool there; a daemon that
	// does not answer is a KindSourceError finding for both.
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
		if n.Name == "" || n.InstanceID == "" || n.Socket == "" {
			return fmt.Errorf("audit: node %+v lacks a name, an instance ID or the daemon's socket", n)
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

// Run reads the four sources (and each daemon's pool) and reports every
// disagreement. A source that cannot be read is
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
	return RunUntilCleanOf(ctx, func() (Input, error) { return in, nil }, within)
}

// RunUntilCleanOf is RunUntilClean on the input input returns at each
// round: the nodes of a lab whose nodes come and go (a node released
// while the audit waits is not audited any more).
func RunUntilCleanOf(ctx context.Context, input func() (Input, error), within time.Duration) (*Report, error) {
	deadline := time.Now().Add(within)
	for {
		in, err := input()
		if err != nil {
			return nil, err
		}
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

// nodeSnap is what was read for one node; nil parts were unreadable.
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
	daemons := make([]*grpc.ClientConn, len(in.Nodes))
	defer func() {
		for _, c := range daemons {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	poolErrs := make([]error, len(in.Nodes))
	for i, n := range in.Nodes {
		ns := &nodeSnap{in: n}
		s.nodes = append(s.nodes, ns)
		if daemons[i], poolErrs[i] = dialDaemon(n.Socket); poolErrs[i] == nil {
			ns.pool, poolErrs[i] = readPool(ctx, daemons[i], n.Socket)
		}
	}
	var err error
	for i, ns := range s.nodes {
		if daemons[i] == nil {
			err = poolErrs[i] // the socket cannot be dialled
		} else if ns.store, err = readRecords(ctx, daemons[i], ns.in.Socket); err == nil {
			continue
		}
		s.sourceError(ns.in.Name, SourceStore, "store records via "+ns.in.Socket, err)
	}
	if s.kube, err = readKube(ctx, in.Kube, in.Nodes); err != nil {
		s.sourceError("", SourceKube, "API server", err)
	}
	if s.world, err = readWorld(ctx, in.HTTPClient, in.FakecloudURL, in.AdminToken); err != nil {
		s.sourceError("", SourceCloud, "fakecloud "+in.FakecloudURL, err)
	}
	for i, ns := range s.nodes {
		if ns.net, err = readNetNS(ns.in.NetNS); err != nil {
			s.sourceError(ns.in.Name, SourceNetNS, "netns "+ns.in.NetNS, err)
		}
		s.secondPool(ctx, ns, daemons[i], poolErrs[i])
	}
	return s
}

// secondPool reads node ns's pool again and merges it with the first
// read. A pool read only once cannot cover the window around the cloud
// read: it is then treated as unreadable rather than risk false leaks.
func (s *snapshot) secondPool(ctx context.Context, ns *nodeSnap, conn *grpc.ClientConn, firstErr error) {
	var err error
	if conn != nil {
		var second *poolView
		if second, err = readPool(ctx, conn, ns.in.Socket); err == nil && firstErr == nil {
			ns.pool = ns.pool.merge(second)
			return
		}
	}
	ns.pool = nil
	s.sourceError(ns.in.Name, SourcePool, "pool via "+ns.in.Socket, errors.Join(firstErr, err))
}

func (s *snapshot) sourceError(node string, src Source, object string, err error) {
	s.errs = append(s.errs, Finding{Kind: KindSourceError, Node: node, Object: object, Detail: err.Error(),
		Sources: []Source{src}})
}
