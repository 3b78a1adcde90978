package daemon

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/rpc"
)

// exhausted reports whether no address can be handed out now: nothing
// idle and the pool cannot grow (a dry vSwitch, or every address the
// instance type allows is taken).
func (d *Daemon) exhausted() bool {
	st := d.pool.Stats()
	if st.Idle > 0 {
		return false
	}
	return st.Starved || st.InUse+st.Reserved >= d.capacity
}

// Status answers CNI STATUS. A daemon that serves is initialised, so it
// is ready; address exhaustion makes it not ready only when the operator
// asked for that (not_ready_on_ip_exhaustion), because a vSwitch running
// dry would otherwise take every node on it out of service.
func (b *backend) Status(ctx context.Context, _ *rpc.StatusRequest) (*rpc.StatusReply, error) {
	d := b.d
	if !d.initialised.Load() {
		return &rpc.StatusReply{Ready: false, Reason: d.initialising()}, nil
	}
	st := d.pool.Stats()
	r := &rpc.StatusReply{Ready: true, Capacity: int32(d.capacity), InUse: int32(st.InUse), Idle: int32(st.Idle),
		Exhausted: d.exhausted()}
	if r.Exhausted && d.cfg.NotReadyOnIPExhaustion {
		r.Ready = false
		r.Reason = "no pod address can be allocated on this node now (not_ready_on_ip_exhaustion is on)"
	}
	return r, nil
}

// GarbageCollect answers CNI GC: the attachments of this node that the
// runtime does not list as valid are released, like a DEL that never
// came. Attachments younger than cni_gc_grace, pods with a call in progress
// and sticky reservations are left alone.
func (b *backend) GarbageCollect(ctx context.Context, r *rpc.GCRequest) (*rpc.GCReply, error) {
	d := b.d
	valid := map[[2]string]bool{}
	for _, a := range r.ValidAttachments {
		if a.ContainerID == "" {
			return nil, status.Error(codes.InvalidArgument, "a valid attachment without ContainerID")
		}
		valid[[2]string{a.ContainerID, ifNameOrDefault(a.IfName)}] = true
	}
	atts, err := d.store.List()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "garbage collect: %v", err)
	}
	reply := &rpc.GCReply{}
	now := d.clock.Now()
	for _, a := range atts {
		if !d.gcCandidate(a, valid, now) {
			continue
		}
		release, err := d.begin(ctx, a.Key(), false)
		if err != nil {
			continue // an RPC is working on the pod; it decides
		}
		cur, err := d.store.Get(a.PodNamespace, a.PodName)
		if err == nil && cur.ContainerID == a.ContainerID {
			d.log.Info("cni gc: releasing an attachment the runtime no longer has", "pod", a.Key(), "container", a.ContainerID)
			d.cleanHost(cur)
			err = d.releaseAttachment(cur, d.isSticky(cur))
			if err == nil {
				reply.Released = append(reply.Released, a.Key())
			}
		}
		release()
		if err != nil && err != store.ErrNotFound {
			return reply, status.Errorf(codes.Internal, "garbage collect %s: %v", a.Key(), err)
		}
	}
	return reply, nil
}

func (d *Daemon) gcCandidate(a store.Attachment, valid map[[2]string]bool, now time.Time) bool {
	switch {
	case a.ContainerID == "", !a.StickyUntil.IsZero(): // a reservation, not an attachment
		return false
	case now.Sub(a.CreatedAt) < d.cfg.CNIGCGrace.Duration:
		return false
	}
	return !valid[[2]string{a.ContainerID, ifNameOrDefault(a.IfName)}]
}

func ifNameOrDefault(s string) string {
	if s == "" {
		return "eth0"
	}
	return s
}
