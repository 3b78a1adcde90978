package daemon

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/k8s"
)

// instanceLimits finds the limits of the instance's type without the
// cloud when it can: the store (a restart), then the node's annotation
// alibabacloud.com/instance-type-info (a node whose store was lost), each
// checked against the type metadata gives now. Otherwise it asks the
// cloud, waiting out throttling rather than failing the start, and keeps
// the answer in the store; publishLoop puts it on the node.
func (d *Daemon) instanceLimits(ctx context.Context, api *cloud.Client, typ string) (cloud.Limits, error) {
	info, err := d.store.InstanceTypeInfo()
	if err != nil {
		d.log.Warn("instance type limits: the store", "err", err)
	}
	if l, ok := d.limitsFrom("the store", info, typ); ok {
		d.limitsInfo = info
		return l, nil
	}
	info = d.nodeLimitsInfo(ctx)
	if l, ok := d.limitsFrom("the node annotation "+k8s.AnnotationInstanceTypeInfo, info, typ); ok {
		d.keepLimitsInfo(info)
		return l, nil
	}
	for {
		l, info, err := api.InstanceTypeLimits(ctx, typ)
		if err == nil {
			d.keepLimitsInfo(info)
			d.log.Info("instance type limits", "source", "DescribeInstanceTypes")
			return l, nil
		}
		if !cloud.IsThrottling(err) {
			return cloud.Limits{}, err
		}
		wait := throttledStartWait(d.backoffSet().Get(backoff.ThrottledAPIRetry))
		d.log.Warn("instance type limits: throttled; waiting for the next window", "wait", wait, "err", err)
		t := d.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return cloud.Limits{}, fmt.Errorf("%w (waiting after: %w)", ctx.Err(), err)
		case <-t.C():
		}
	}
}

// throttledStartWait is how long a start that the cloud throttles waits
// before it asks again: the throttled policy's cap (a minute, about an API
// budget window), stretched by up to its jitter at random, so that a fleet
// starting together spreads over the next window instead of crash-looping
// on this one.
func throttledStartWait(p backoff.Policy) time.Duration {
	w := max(p.Cap, p.Duration)
	return wait.Jitter(w, max(p.Jitter, 0.1))
}

// limitsFrom reads limits out of info, kept by source, when it describes
// typ.
func (d *Daemon) limitsFrom(source string, info []byte, typ string) (cloud.Limits, bool) {
	if info == nil {
		return cloud.Limits{}, false
	}
	l, err := cloud.LimitsFromInfo(info, typ)
	if err != nil {
		d.log.Warn("instance type limits not used", "source", source, "err", err)
		return cloud.Limits{}, false
	}
	d.log.Info("instance type limits", "source", source)
	return l, true
}

// nodeLimitsInfo reads the annotation from the node, or nil.
func (d *Daemon) nodeLimitsInfo(ctx context.Context) []byte {
	if d.kube == nil {
		return nil
	}
	n, err := d.kube.Node(ctx)
	if err != nil {
		d.log.Warn("instance type limits: read the node", "err", err)
		return nil
	}
	if v, ok := n.Annotations[k8s.AnnotationInstanceTypeInfo]; ok {
		return []byte(v)
	}
	return nil
}

// keepLimitsInfo keeps info for publishLoop and in the store.
func (d *Daemon) keepLimitsInfo(info []byte) {
	d.limitsInfo = info
	if err := d.store.SetInstanceTypeInfo(info); err != nil {
		d.log.Warn("instance type limits: keep them in the store", "err", err)
	}
}
