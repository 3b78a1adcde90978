package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/terway-sim/terway/fakecloud"
)

// WaitQuiet polls until the pool has no operation in flight and neither
// its counts nor the node's cloud calls changed over quiet (real time),
// and returns the counts.
func (h *Harness) WaitQuiet(ctx context.Context, n *Node, quiet time.Duration) (PoolStats, error) {
	var last PoolStats
	lastCalls := int64(-1)
	for {
		s, err := n.PoolStats(ctx)
		if err != nil {
			return s, err
		}
		calls := h.Cloud.CallCount(fakecloud.CallFilter{InstanceID: n.InstanceID})
		if s.Quiet() && s == last && calls == lastCalls {
			return s, nil
		}
		last, lastCalls = s, calls
		if err := Sleep(ctx, quiet); err != nil {
			return s, fmt.Errorf("wait for %s to settle (last %+v): %w", n.Name, s, err)
		}
	}
}

// Sleep waits d (real time) unless ctx ends first, and then returns
// ctx's error: the waits of the scenarios that run on a harness.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
