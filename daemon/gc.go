package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/store"
)

// firstGCDelay bounds the wait for the first GC round after start (after
// the API server has been read): a daemon back from a crash missed the
// DELs of the pods deleted meanwhile, and their addresses must not wait a
// whole gc_period (5m by default) to come back. Short enough for that,
// long enough for the kubelet's own retried DELs and the pool's first
// sync to come first.
const firstGCDelay = 30 * time.Second

// gcLoop reconciles every gc_period; its caller starts it once the API
// server has been read (waitForAPI). The first round comes firstGCDelay
// after that, or a gc_period when that is shorter.
func (d *Daemon) gcLoop(ctx context.Context) {
	period := d.cfg.GCPeriod.Duration
	d.every(ctx, min(firstGCDelay, period), period, func(ctx context.Context) {
		if err := d.GC(ctx); err != nil {
			d.log.Warn("gc", "err", err)
		}
		d.gcRounds.Add(1)
	})
}

// GC reconciles the store with the node's pods: addresses of pods that
// are gone (or finished) go back to the pool — sticky ones after the
// stick time — and pool holdings no record explains are released. It
// also sweeps our own orphan ENIs.
func (d *Daemon) GC(ctx context.Context) error {
	if !d.apiRead.Load() {
		return errors.New("gc: the API server has not been read yet; nothing is released until it has")
	}
	pods, err := d.kube.Pods()
	if err != nil {
		return err
	}
	live := map[string]k8s.Pod{}
	for _, p := range pods {
		live[p.Key()] = p
	}
	// Owners first: an address handed out after this snapshot is not
	// considered, and RPCs in progress are skipped below.
	owners := d.pool.Owners()
	atts, err := d.store.List()
	if err != nil {
		return err
	}
	now := d.clock.Now()
	known := map[string]bool{}
	var errs []error
	var held map[netip.Addr]bool
	for _, a := range atts {
		key := a.Key()
		known[key] = true
		if p, ok := live[key]; ok && p.Alive() {
			continue
		}
		// The informer may lag: ask the API server before releasing.
		if p, ok, err := d.kube.PodExists(ctx, a.PodNamespace, a.PodName); err != nil {
			errs = append(errs, err)
			continue
		} else if ok && p.Alive() {
			continue
		}
		if held == nil {
			held = d.stillHeld(live)
		}
		if err := d.gcAttachment(ctx, a, now, held); err != nil {
			errs = append(errs, err)
		}
	}
	for _, owner := range owners {
		if isHeldOwner(owner) {
			if held == nil {
				held = d.stillHeld(live)
			}
			if ip, err := netip.ParseAddr(strings.TrimPrefix(owner, heldPrefix)); err == nil && !held[ip] {
				d.log.Info("gc: releasing an address no source shows as held any more", "ip", ip)
				d.cleanHost(store.Attachment{PodName: owner, Resources: []store.Resource{{IPv4: ip.String()}}})
				d.pool.Release(owner, time.Time{})
			}
			continue
		}
		if !known[owner] {
			d.releaseUnexplained(ctx, owner)
		}
	}
	if err := d.sweep(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := d.sweepEIPs(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// releaseUnexplained releases an address the pool holds for a pod the
// store had no record of when GC listed it — unless an AllocIP recorded
// one since: the pod's turn is taken and the store read again, so that GC
// never frees what an RPC has just handed out.
func (d *Daemon) releaseUnexplained(ctx context.Context, owner string) {
	done, err := d.begin(ctx, owner, false)
	if err != nil {
		return // an RPC is working on it; next round
	}
	defer done()
	ns, name, _ := strings.Cut(owner, "/")
	if _, err := d.store.Get(ns, name); !errors.Is(err, store.ErrNotFound) {
		return
	}
	d.log.Warn("releasing an address no record explains", "owner", owner)
	d.pool.Release(owner, time.Time{})
}

// gcAttachment releases the record a of a pod that is gone, with the
// pod's turn taken and the record read again: an RPC since the listing
// may have changed it.
func (d *Daemon) gcAttachment(ctx context.Context, a store.Attachment, now time.Time, held map[netip.Addr]bool) error {
	done, err := d.begin(ctx, a.Key(), false)
	if err != nil {
		return nil // an RPC is working on it; next round
	}
	defer done()
	cur, err := d.store.Get(a.PodNamespace, a.PodName)
	if errors.Is(err, store.ErrNotFound) || err == nil && cur.ContainerID != a.ContainerID {
		return nil // released or re-allocated meanwhile
	}
	if err != nil {
		return err
	}
	a = cur
	if ip, ok := heldElsewhere(a, held); ok {
		return d.keepHeld(a, ip)
	}
	switch {
	case a.StickyUntil.IsZero() && d.isSticky(a):
		// A sticky pod deleted while nobody released it (the daemon was
		// down, or DEL never came): keep its address for the stick time.
		d.cleanHost(a)
		return d.releaseAttachment(a, true)
	case !a.StickyUntil.IsZero() && now.Before(a.StickyUntil):
		return nil
	}
	d.log.Info("gc: releasing the address of a pod that is gone", "pod", a.Key())
	if a.StickyUntil.IsZero() {
		d.cleanHost(a) // a sticky record's host side went when it was reserved
	}
	return d.releaseAttachment(a, false)
}

// heldElsewhere reports the address of a gone pod's record that the
// node's truth still shows configured: a live pod's, or a sandbox's whose
// host route is alive.
func heldElsewhere(a store.Attachment, held map[netip.Addr]bool) (netip.Addr, bool) {
	for _, r := range a.Resources {
		if ip, err := netip.ParseAddr(r.IPv4); err == nil && held[ip] {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// keepHeld drops the record of a gone pod whose address is still
// configured, keeping the address held under a placeholder owner until no
// source shows it any more; its host routes are left alone, since they
// may be a running pod's.
func (d *Daemon) keepHeld(a store.Attachment, ip netip.Addr) error {
	if !d.pool.Reassign(a.Key(), heldOwner(ip)) {
		if _, ok := d.holds(heldOwner(ip)); !ok {
			return fmt.Errorf("gc: keep %s of %s held: the pool does not hold it for %s", ip, a.Key(), a.Key())
		}
	}
	d.log.Warn("gc: a gone pod's record names an address the node still shows configured; keeping it held", "pod", a.Key(), "ip", ip)
	return d.store.Update(func(tx *store.Tx) error {
		if err := tx.Delete(a.PodNamespace, a.PodName); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := tx.DeletePod(a.PodNamespace, a.PodName); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	})
}

// cleanHost removes the host rules and routes a pod's datapath left for
// its addresses when no CNI DEL came to remove them. Failures are logged:
// the mapping reports what is left.
func (d *Daemon) cleanHost(a store.Attachment) {
	if d.host == nil {
		return
	}
	for _, r := range a.Resources {
		for _, s := range []string{r.IPv4, r.IPv6} {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			rm, err := d.host.Release(ip)
			if err != nil {
				d.log.Warn("remove host rules and routes", "pod", a.Key(), "ip", ip, "err", err)
			} else if rm.Rules+rm.Routes > 0 {
				d.log.Info("removed host rules and routes of a released address", "pod", a.Key(), "ip", ip, "removed", rm.String())
			}
		}
	}
}

// supplyCheckPeriod is how often the daemon looks whether the
// SufficientIP condition it published still holds; it writes only when
// it changed, so a vSwitch running dry shows within seconds without a
// node write every few seconds.
const supplyCheckPeriod = 10 * time.Second

// supplyLoop publishes the address supply as soon as it changes.
func (d *Daemon) supplyLoop(ctx context.Context) {
	d.every(ctx, supplyCheckPeriod, supplyCheckPeriod, func(ctx context.Context) {
		if last := d.supply.Load(); last == nil || *last != d.sufficientIP() {
			d.updateSufficientIP(ctx)
		}
	})
}

// publishLoop publishes the node's capacity, its instance type's limits
// and its address supply once a minute (a refresh, should anyone else
// have changed them).
func (d *Daemon) publishLoop(ctx context.Context) {
	d.every(ctx, 0, time.Minute, func(ctx context.Context) {
		ann := map[string]string{k8s.AnnotationMaxAvailableIP: strconv.Itoa(d.capacity)}
		if d.limitsInfo != nil {
			ann[k8s.AnnotationInstanceTypeInfo] = string(d.limitsInfo)
		}
		err := d.kube.AnnotateNode(ctx, ann)
		if err != nil {
			d.log.Warn("publish capacity", "err", err)
		}
		d.updateSufficientIP(ctx)
	})
}

// supplyCondition is the SufficientIP condition as published.
type supplyCondition struct {
	status       corev1.ConditionStatus
	reason, text string
}

// sufficientIP is the SufficientIP condition the pool's state calls
// for: False while the pool cannot grow (a dry vSwitch) or the node is
// full, True otherwise.
func (d *Daemon) sufficientIP() supplyCondition {
	st := d.pool.Stats()
	switch {
	case st.Starved:
		return supplyCondition{corev1.ConditionFalse, "InsufficientIP", "the cloud cannot give this node more addresses now"}
	case st.Idle == 0 && st.InUse >= d.capacity:
		return supplyCondition{corev1.ConditionFalse, "NoCapacity", "all addresses the instance type allows are in use"}
	}
	return supplyCondition{corev1.ConditionTrue, "SufficientIP", "the node can allocate pod addresses"}
}

// updateSufficientIP sets the SufficientIP node condition. It is a
// condition, not NotReady: a whole vSwitch running dry must not evict its
// pods.
func (d *Daemon) updateSufficientIP(ctx context.Context) {
	c := d.sufficientIP()
	if err := d.kube.SetCondition(ctx, k8s.ConditionSufficientIP, c.status, c.reason, c.text); err != nil {
		d.log.Warn("set node condition", "err", err)
		return
	}
	d.supply.Store(&c)
}
