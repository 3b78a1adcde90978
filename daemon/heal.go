package daemon

import (
	"context"
	"strings"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/daemon/ipam"
	"github.com/terway-sim/terway/daemon/k8s"
)

// ReasonResourceLost is the event on a pod whose address an operator
// took away out of band (its ENI detached or deleted, or the address
// unassigned and not assignable back): the pod is evicted.
const ReasonResourceLost = "ResourceLost"

// healLoop runs a heal round every pool_heal_period (ipam.Healer: what an
// operator changed out of band under pods). It starts with Serve, after
// the restore: a heal never runs on state the daemon has not restored.
func (d *Daemon) healLoop(ctx context.Context) {
	h, ok := d.pool.(ipam.Healer)
	if !ok {
		return
	}
	period := d.cfg.PoolHealPeriod.Duration
	d.every(ctx, period, period, func(ctx context.Context) { d.heal(ctx, h) })
}

// heal runs one heal round, returning what it did, and evicts the pods whose address is lost
// (every round, until they are gone: an eviction may be refused for a
// while by a disruption budget).
func (d *Daemon) heal(ctx context.Context, h ipam.Healer) []ipam.Heal {
	heals := h.Heal(ctx)
	for _, x := range heals {
		if x.Outcome == "" {
			d.log.Info("heal: not yet", "why", x.Why)
			continue
		}
		d.metrics.heals.WithLabelValues(x.Outcome).Inc()
		d.log.Warn("heal: "+x.Why, "outcome", x.Outcome, "owner", x.Owner, "ip", x.IPv4, "eni", x.ENIID)
		switch x.Outcome {
		case ipam.HealLost:
			d.kube.NodeEvent(k8s.Warning, ReasonResourceLost, x.Why+"; evicting "+x.Owner)
			if ns, name, ok := strings.Cut(x.Owner, "/"); ok {
				uid := ""
				if p, err := d.kube.Pod(ctx, ns, name); err == nil {
					uid = p.UID
				}
				d.kube.PodEvent(ns, name, uid, k8s.Warning, ReasonResourceLost, x.Why+": the pod is evicted")
			}
		case ipam.HealReassigned:
			d.kube.NodeEvent(k8s.Normal, "ResourceHealed", x.Why)
		}
	}
	if !d.apiRead.Load() {
		return heals // who runs is not known yet; the claims stay
	}
	for _, owner := range h.LostOwners() {
		ns, name, ok := strings.Cut(owner, "/")
		if !ok || isHeldOwner(owner) {
			continue // a placeholder: GC releases it when no source shows it
		}
		d.evict(ctx, ns, name)
	}
	return heals
}

// evict asks the API server to evict a pod (the Eviction API, so that
// disruption budgets are respected); a pod that is gone needs nothing.
func (d *Daemon) evict(ctx context.Context, ns, name string) {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	err := d.opts.Kube.Pods(ns).EvictV1(ctx, ev)
	switch {
	case err == nil:
		d.log.Warn("heal: evicted a pod whose address was lost out of band", "pod", ns+"/"+name)
	case apierrors.IsNotFound(err):
	default:
		d.log.Warn("heal: evict a pod whose address was lost out of band (retried next round)", "pod", ns+"/"+name, "err", err)
	}
}
