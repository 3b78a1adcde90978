package daemon

import (
	"context"
	"fmt"
	"math"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/k8s"
)

// instanceLimits finds the limits of the instance's type without the
// cloud when it can: the store (a restart), then the node's annotation
// alibabacloud.com/instance-type-info (a node whose store was lost), then
// that of another node of the same type (a new node), each checked
// against the type metadata gives now. Otherwise it asks the
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
	if l, info, ok := d.publishedLimits(ctx, typ); ok {
		d.keepLimitsInfo(info)
		return l, nil
	}
	bo := d.backoffSet().Get(backoff.ThrottledAPIRetry).Backoff()
	bo.Steps = math.MaxInt32 // a start waits as long as it takes
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
		wait, ok := cloud.ThrottleWait(err, d.clock.Now())
		if !ok {
			wait = bo.Step()
		}
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

// peerNodes is how many nodes of its type a daemon looks at for limits
// another one published: one answer is enough, a few in case some are
// stale.
const peerNodes = 20

// publishedLimits returns limits published on a node, this one first,
// then another of the same type (node.kubernetes.io/instance-type): when
// a fleet starts together only its first daemons ask the cloud, which
// otherwise throttles a thousand DescribeInstanceTypes at once.
func (d *Daemon) publishedLimits(ctx context.Context, typ string) (cloud.Limits, []byte, bool) {
	if d.kube == nil {
		return cloud.Limits{}, nil, false
	}
	own, err := d.kube.Node(ctx)
	if err != nil {
		d.log.Warn("instance type limits: read the node", "err", err)
	} else if info := own.Annotations[k8s.AnnotationInstanceTypeInfo]; info != "" {
		if l, ok := d.limitsFrom("the node annotation "+k8s.AnnotationInstanceTypeInfo, []byte(info), typ); ok {
			return l, []byte(info), true
		}
	}
	peers, err := d.kube.NodesOfType(ctx, typ, peerNodes)
	if err != nil {
		d.log.Warn("instance type limits: nodes of the same type", "err", err)
		return cloud.Limits{}, nil, false
	}
	for _, n := range peers {
		info := n.Annotations[k8s.AnnotationInstanceTypeInfo]
		if n.Name == d.kube.NodeName() || info == "" {
			continue
		}
		if l, ok := d.limitsFrom("node "+n.Name, []byte(info), typ); ok {
			return l, []byte(info), true
		}
	}
	return cloud.Limits{}, nil, false
}

// keepLimitsInfo keeps info for publishLoop and in the store.
func (d *Daemon) keepLimitsInfo(info []byte) {
	d.limitsInfo = info
	if err := d.store.SetInstanceTypeInfo(info); err != nil {
		d.log.Warn("instance type limits: keep them in the store", "err", err)
	}
}
