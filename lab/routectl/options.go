package routectl

import (
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/terway-sim/terway/daemon/backoff"
)

// DefaultClusterCIDR is the lab's VPC-mode cluster CIDR (ARCHITECTURE.md).
var DefaultClusterCIDR = netip.MustParsePrefix("172.20.0.0/16")

// DefaultResync is how often the route table is compared with the nodes
// even without node events, so that drift on the cloud side is repaired.
const DefaultResync = time.Minute

// Backoff policy keys this package reads from Options.Backoff, besides
// backoff.ThrottledAPIRetry (waits after a Throttling answer). A key that
// is not set falls back to backoff's default policy.
const (
	// PolicyAPI paces retries of a VPC call that failed transiently
	// (internal errors, conflicts, an entry still Pending, transport).
	PolicyAPI = "route_api"
	// PolicyWait paces polls of new entries until they are Available.
	PolicyWait = "route_wait"
)

// Options configure the route controller.
type Options struct {
	// Kube is the client whose Nodes are watched.
	Kube kubernetes.Interface
	// Endpoint is the VPC API: "http://host:port" for an emulator, a bare
	// host for HTTPS, empty for the SDK's own endpoint of Region.
	Endpoint string
	Region   string
	VpcID    string
	// AccessKeyID and AccessKeySecret are the static AccessKey pair the
	// controller signs its calls with.
	AccessKeyID     string
	AccessKeySecret string
	// ClusterCIDR bounds the entries the controller owns; the zero value
	// means DefaultClusterCIDR.
	ClusterCIDR netip.Prefix
	// Logger nil discards logs.
	Logger *slog.Logger
	// Resync is the period of full comparisons; 0 means DefaultResync.
	Resync time.Duration
	// Backoff holds the retry policies (PolicyAPI, PolicyWait,
	// backoff.ThrottledAPIRetry); nil means DefaultBackoff(). A Set
	// without PolicyAPI or PolicyWait uses backoff's default policy there.
	Backoff *backoff.Set
	// WaitTimeout bounds the wait for new entries to become Available in
	// one sync; 0 means two minutes.
	WaitTimeout time.Duration
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Region == "":
		return o, errors.New("routectl: region is required")
	case o.VpcID == "":
		return o, errors.New("routectl: VPC ID is required")
	case o.AccessKeyID == "" || o.AccessKeySecret == "":
		return o, errors.New("routectl: an AccessKey pair is required")
	}
	if !o.ClusterCIDR.IsValid() {
		o.ClusterCIDR = DefaultClusterCIDR
	}
	o.ClusterCIDR = o.ClusterCIDR.Masked()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff()
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = 2 * time.Minute
	}
	return o, nil
}

// DefaultBackoff returns backoff's policies plus this package's: PolicyAPI
// as backoff's default (2 s ×1.5, 6 steps) and PolicyWait 1 s ×1.5 up to
// 10 s, for entries that take seconds to become Available.
func DefaultBackoff() *backoff.Set {
	return backoff.NewSet(nil, map[string]backoff.Policy{
		PolicyAPI:  backoff.Defaults()[backoff.Default],
		PolicyWait: {Duration: time.Second, Factor: 1.5, Jitter: 0.2, Steps: 8, Cap: 10 * time.Second},
	})
}
