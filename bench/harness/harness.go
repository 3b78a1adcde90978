// Package harness runs fakecloud in this process, serving the ECS/VPC API
// on a loopback listener, and adds nodes to it: an instance (with a RAM
// role, so that its calls are attributed to it) with its metadata
// listener and its own terwayd (package daemon as a library: a fake
// clientset, a store and a socket in a short temp dir), reached over gRPC
// as the CNI plugin and terway-cli reach it. Time can be scaled: every
// fakecloud delay and every daemon interval eni_conf reaches. The node
// scenarios and the peer reproduction run on it; Close leaves nothing
// behind.
package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"golang.org/x/time/rate"

	"github.com/terway-sim/terway/bench/profile"
	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/fakecloud"
)

// World constants of the harness: one zone of the default region, a node
// vSwitch for the instances' primary ENIs and pod vSwitches for the ENIs
// the daemons create. Addresses exist only inside fakecloud.
const (
	Zone               = "cn-hangzhou-h"
	NodeVSwitch        = "vsw-bp1bench0000000nodes"
	DefaultPodVSwitch  = "vsw-bp1bench00000000pod1"
	DefaultPodCIDR     = "192.168.64.0/18"
	nodeVSwitchCIDR    = "192.168.0.0/18"
	benchAccessKeyID   = "LTAIbenchharness"
	benchAccessSecret  = "bench-harness-secret"
	defaultClusterID   = "c-bench"
	defaultServiceCIDR = "10.96.0.0/12"
)

// DefaultInstanceType fits a 100-pod node: 7 secondary ENIs × 30
// addresses = 210.
const DefaultInstanceType = "ecs.g7.4xlarge"

// Options configure a Harness.
type Options struct {
	// Profile sets fakecloud's delays and per-action latencies; the zero
	// Profile means the built-in "default".
	Profile profile.Profile
	// Seed drives fakecloud's IDs, addresses and latency jitter.
	Seed int64
	// TimeScale multiplies every simulated duration to get real time
	// (0.1 runs ten times faster); 0 means 1. fakecloud's delays and
	// latencies, the throttle window and every daemon interval, backoff
	// and rate limit that eni_conf can set are scaled.
	TimeScale float64
	// PodVSwitches are the vSwitches the daemons create ENIs in (zone and
	// VPC filled in); empty means one /18 (DefaultPodVSwitch).
	PodVSwitches []fakecloud.VSwitchSpec
	// ThrottleWindow (simulated; 0: fakecloud's 60 s) and Throttle (calls
	// per window by action, "*" for the rest; nil keeps fakecloud's
	// defaults) are the account-wide API budgets.
	ThrottleWindow time.Duration
	Throttle       map[string]int
	// SharedQPS, when > 0, puts one token bucket (SharedQPS calls per
	// simulated second, burst SharedBurst) in front of the API for all
	// nodes together: a client-side limiter shared by every caller, as
	// one operator process has (Cilium). Calls wait for it, they never
	// fail.
	SharedQPS   float64
	SharedBurst int
	// StoreNoSync skips the daemons' fsync (the fleet; node benchmarks
	// keep it, as production does).
	StoreNoSync bool
	// Logger receives the daemons' and fakecloud's logs; nil discards them.
	Logger *slog.Logger
}

// Harness is fakecloud in this process, serving the ECS/VPC API on a
// loopback listener, plus the nodes (instances with a terwayd each) added
// to it. Close leaves nothing behind: no listener, goroutine or file.
type Harness struct {
	// Cloud is the emulator; tests and scenarios use its Go API
	// (accounting, faults, views).
	Cloud *fakecloud.Cloud
	// APIURL is the ECS/VPC endpoint ("http://127.0.0.1:port").
	APIURL  string
	opts    Options
	scale   float64
	dir     string
	api     *http.Server
	apiDone chan struct{}

	mu    sync.Mutex
	nodes []*Node
	seq   int
}

// New starts fakecloud with the harness world and the profile,
// and serves its API on 127.0.0.1.
func New(ctx context.Context, o Options) (*Harness, error) {
	if err := checkProxy(); err != nil {
		return nil, err
	}
	if o.Profile.Name == "" {
		o.Profile = profile.Default()
	}
	if err := o.Profile.Validate(); err != nil {
		return nil, err
	}
	if o.TimeScale <= 0 {
		o.TimeScale = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	spec, err := harnessSpec(o)
	if err != nil {
		return nil, err
	}
	fc, err := fakecloud.New(fakecloud.Options{Spec: &spec, Seed: o.Seed, TimeScale: o.TimeScale, Logger: o.Logger.With("component", "fakecloud")})
	if err != nil {
		return nil, fmt.Errorf("start fakecloud: %w", err)
	}
	h := &Harness{Cloud: fc, opts: o, scale: o.TimeScale, apiDone: make(chan struct{})}
	for _, f := range o.Profile.Faults() {
		if _, err := fc.AddFault(f); err != nil {
			_ = fc.Close()
			return nil, fmt.Errorf("profile %s: %w", o.Profile.Name, err)
		}
	}
	// Unix socket paths are limited to 108 bytes: keep the directory short.
	if h.dir, err = os.MkdirTemp("", "tb"); err != nil {
		_ = fc.Close()
		return nil, fmt.Errorf("harness directory: %w", err)
	}
	var handler http.Handler = fc
	if o.SharedQPS > 0 {
		handler = sharedLimiter(fc, rate.NewLimiter(rate.Limit(o.SharedQPS/o.TimeScale), max(1, o.SharedBurst)))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.closeCloud()
		return nil, fmt.Errorf("listen for the API: %w", err)
	}
	h.APIURL = "http://" + ln.Addr().String()
	h.api = fakecloud.NewHTTPServer(handler, fakecloud.ServerTimeouts{ReadHeader: time.Minute}, nil)
	go func() { defer close(h.apiDone); _ = h.api.Serve(ln) }()
	return h, nil
}

// checkProxy refuses to run when an HTTP proxy would carry the SDK's
// loopback calls (the old SDK does not honour loopback by itself).
func checkProxy() error {
	proxy := os.Getenv("HTTP_PROXY") + os.Getenv("http_proxy")
	if proxy == "" {
		return nil
	}
	no := os.Getenv("NO_PROXY") + "," + os.Getenv("no_proxy")
	if strings.Contains(no, "127.0.0.1") {
		return nil
	}
	return errors.New("HTTP_PROXY is set: export NO_PROXY=127.0.0.1,localhost so that the SDK reaches fakecloud on loopback")
}

// harnessSpec is the world: one zone, one VPC, a node vSwitch, the pod
// vSwitches, a static AccessKey for the harness's own calls, and no
// instances (nodes add theirs).
func harnessSpec(o Options) (fakecloud.Spec, error) {
	def := fakecloud.DefaultSpec()
	s := fakecloud.Spec{RegionID: def.RegionID, AccountID: def.AccountID, Zones: []string{Zone}, VPCs: def.VPCs,
		SecurityGroups: def.SecurityGroups, Settings: fakecloud.DefaultSettings(),
		AccessKeys: []fakecloud.AccessKeySpec{{ID: benchAccessKeyID, Secret: benchAccessSecret}}}
	s.VSwitches = []fakecloud.VSwitchSpec{{ID: NodeVSwitch, Name: "bench-nodes", VPCID: fakecloud.DefaultVPCID, ZoneID: Zone, CIDR: nodeVSwitchCIDR}}
	pods := o.PodVSwitches
	if len(pods) == 0 {
		pods = []fakecloud.VSwitchSpec{{ID: DefaultPodVSwitch, CIDR: DefaultPodCIDR}}
	}
	for _, v := range pods {
		if v.VPCID == "" {
			v.VPCID = fakecloud.DefaultVPCID
		}
		if v.ZoneID == "" {
			v.ZoneID = Zone
		}
		s.VSwitches = append(s.VSwitches, v)
	}
	o.Profile.ApplySettings(&s.Settings)
	if o.ThrottleWindow > 0 {
		s.Settings.ThrottleWindow = fakecloud.Duration(o.ThrottleWindow)
	}
	// fakecloud does not scale its throttle window: the harness does.
	s.Settings.ThrottleWindow = fakecloud.Duration(time.Duration(float64(s.Settings.ThrottleWindow) * o.TimeScale))
	if o.Throttle != nil {
		s.Settings.Throttle = o.Throttle
	}
	return s, s.Validate()
}

// sharedLimiter makes every API call wait for one token bucket.
func sharedLimiter(next http.Handler, lim *rate.Limiter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := lim.Wait(r.Context()); err != nil {
			http.Error(w, "shared limiter: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Scale is the time scale (real = simulated × Scale).
func (h *Harness) Scale() float64 { return h.scale }

// Real converts a simulated duration to real time.
func (h *Harness) Real(sim time.Duration) time.Duration {
	return time.Duration(float64(sim) * h.scale)
}

// Sim converts a real duration to simulated time.
func (h *Harness) Sim(real time.Duration) time.Duration {
	return time.Duration(float64(real) / h.scale)
}

// Profile is the profile in force.
func (h *Harness) Profile() profile.Profile { return h.opts.Profile }

// Nodes returns the nodes added so far, in order.
func (h *Harness) Nodes() []*Node {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*Node(nil), h.nodes...)
}

// Close stops every node, the API listener and fakecloud, and removes
// the harness's directory.
func (h *Harness) Close() error {
	var errs []error
	for _, n := range h.Nodes() {
		errs = append(errs, n.Close())
	}
	if h.api != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := h.api.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop the API listener: %w", err))
			_ = h.api.Close()
		}
		cancel()
		<-h.apiDone
		h.api = nil
	}
	h.closeCloud()
	return errors.Join(errs...)
}

func (h *Harness) closeCloud() {
	_ = h.Cloud.Close()
	if h.dir != "" {
		_ = os.RemoveAll(h.dir)
		h.dir = ""
	}
}

// Calls counts API calls since the accounting was last reset, by action
// (all outcomes), made by the given instances (none: every caller). The
// second map counts the throttled ones by action.
func (h *Harness) Calls(instances ...string) (byAction, throttled map[string]int64) {
	byAction, throttled = map[string]int64{}, map[string]int64{}
	want := map[string]bool{}
	for _, i := range instances {
		want[i] = true
	}
	for _, s := range h.Cloud.Calls() {
		if len(want) > 0 && !want[s.InstanceID] {
			continue
		}
		byAction[s.Action] += s.Count
		if strings.HasPrefix(s.Outcome, "Throttling") { // any of the codes a world may choose
			throttled[s.Action] += s.Count
		}
	}
	return byAction, throttled
}

// AdminClient returns a cloud client that calls the API with the
// harness's own AccessKey (not attributed to any node): scenarios use it
// to change the world as another tenant would.
func (h *Harness) AdminClient() (*cloud.Client, error) {
	return cloud.New(cloud.Options{RegionID: fakecloud.DefaultRegion, ECSEndpoint: h.APIURL, VPCEndpoint: h.APIURL,
		Credentials: credentials.NewStaticAKCredentialsProvider(benchAccessKeyID, benchAccessSecret),
		RateLimits:  unlimited(), Backoff: backoff.NewSet(nil, scaledWaitBackoffs(h.scale))})
}

// scaledWaitBackoffs are the daemon's built-in retry schedules at time
// scale s.
func scaledWaitBackoffs(s float64) map[string]backoff.Policy {
	out := backoff.Defaults()
	for k, b := range out {
		b.InitialDelay = time.Duration(float64(b.InitialDelay) * s)
		b.Duration = time.Duration(float64(b.Duration) * s)
		b.Cap = time.Duration(float64(b.Cap) * s)
		out[k] = b
	}
	return out
}

// unlimited switches every client-side rate limit off.
func unlimited() map[string]int {
	m := cloud.DefaultRateLimits()
	for k := range m {
		m[k] = 0
	}
	return m
}
