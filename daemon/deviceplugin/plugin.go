// Package deviceplugin advertises how many ENIs a pod can still get for
// itself, as the kubelet extended resource aliyun/eni, so the scheduler only
// places exclusive-ENI pods (ENIOnly mode, exclusive ENIs in VPC mode) on
// nodes that can actually serve them.
//
// The plugin runs inside terwayd: the daemon owns the ENI accounting and
// calls SetCount; the plugin only speaks the kubelet device-plugin protocol
// and survives kubelet restarts by registering again.
package deviceplugin

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"
)

// DefaultResourceName is Terway's extended resource for exclusive ENIs; pod
// specs and Terway's webhook request it by this name, so it must not drift.
const DefaultResourceName = "aliyun/eni"

const (
	defaultPollInterval  = time.Second
	defaultMaxRetryDelay = 30 * time.Second
	deviceIDPrefix       = "eni-"
)

// Options carries everything the plugin uses, so that several plugins (one
// per simulated node) can live in one process and tests can run on a fake
// clock in a temporary directory.
type Options struct {
	// ResourceName is the extended resource to advertise; empty means
	// DefaultResourceName.
	ResourceName string
	// Dir is kubelet's device-plugin directory, holding kubelet.sock and the
	// plugin's own socket; empty means v1beta1.DevicePluginPath.
	Dir string
	// Logger receives the plugin's logs; nil discards them.
	Logger *slog.Logger
	// Clock drives the kubelet-restart polling and the retry backoff; nil
	// means the real clock.
	Clock clock.WithTicker
	// PollInterval is how often the sockets are checked for a kubelet
	// restart; zero means one second.
	PollInterval time.Duration
	// MaxRetryDelay caps the backoff between failed registrations; zero
	// means 30 seconds.
	MaxRetryDelay time.Duration
}

// Plugin is the aliyun/eni device plugin. SetCount may be called from any
// goroutine, before or while Run is serving.
type Plugin struct {
	resource      string
	dir           string
	log           *slog.Logger
	clock         clock.WithTicker
	poll          time.Duration
	maxRetryDelay time.Duration
	running       atomic.Bool

	mu      sync.Mutex
	count   int
	changed chan struct{} // closed and replaced on every count change
}

// New builds a plugin advertising no devices until SetCount is called, so
// that kubelet never sees capacity the daemon has not confirmed.
func New(o Options) *Plugin {
	o = o.withDefaults()
	return &Plugin{
		resource:      o.ResourceName,
		dir:           o.Dir,
		log:           o.Logger.With("component", "deviceplugin", "resource", o.ResourceName),
		clock:         o.Clock,
		poll:          o.PollInterval,
		maxRetryDelay: o.MaxRetryDelay,
		changed:       make(chan struct{}),
	}
}

func (o Options) withDefaults() Options {
	if o.ResourceName == "" {
		o.ResourceName = DefaultResourceName
	}
	if o.Dir == "" {
		o.Dir = v1beta1.DevicePluginPath
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.PollInterval <= 0 {
		o.PollInterval = defaultPollInterval
	}
	if o.MaxRetryDelay <= 0 {
		o.MaxRetryDelay = defaultMaxRetryDelay
	}
	return o
}

// SetCount publishes how many ENIs pods can still claim exclusively; every
// open ListAndWatch stream gets the new list, so kubelet's allocatable
// follows the daemon's pool. Device IDs are stable ("eni-0".."eni-(n-1)"),
// so growing keeps the IDs kubelet already handed out. Negative n counts as
// zero.
func (p *Plugin) SetCount(n int) {
	n = max(n, 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	if n == p.count {
		return
	}
	p.log.Info("device count changed", "from", p.count, "to", n)
	p.count = n
	close(p.changed)
	p.changed = make(chan struct{})
}

// snapshot returns the current device list and a channel closed at the next
// change, taken together so a stream never misses an update.
func (p *Plugin) snapshot() ([]*v1beta1.Device, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return devices(p.count), p.changed
}

func devices(n int) []*v1beta1.Device {
	devs := make([]*v1beta1.Device, n)
	for i := range devs {
		devs[i] = &v1beta1.Device{ID: fmt.Sprintf("%s%d", deviceIDPrefix, i), Health: v1beta1.Healthy}
	}
	return devs
}
