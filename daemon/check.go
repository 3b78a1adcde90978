package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/terway-sim/terway/daemon/cnicheck"
	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/rpc"
)

// checkLoop runs Check every CheckPeriod.
func (d *Daemon) checkLoop(ctx context.Context) {
	if d.opts.CheckPeriod <= 0 {
		return
	}
	d.every(ctx, d.opts.CheckPeriod, d.opts.CheckPeriod, func(ctx context.Context) {
		if err := d.Check(ctx); err != nil {
			d.log.Warn("periodic check", "err", err)
		}
	})
}

// Check looks at every pod the store knows: a live pod whose resources
// the three-way mapping finds broken, or whose network fails CNI CHECK,
// gets a ResourceInvalid event.
func (d *Daemon) Check(ctx context.Context) error {
	maps, err := d.Mapping(ctx)
	if err != nil {
		return err
	}
	broken := map[string]string{}
	for _, m := range maps {
		if m.Type == rpc.ResourceMappingType_MappingTypeError && m.PodName != "" {
			broken[m.PodName] = m.Reason
		}
	}
	atts, err := d.store.List()
	if err != nil {
		return err
	}
	for _, a := range atts {
		p, err := d.kube.Pod(ctx, a.PodNamespace, a.PodName)
		if err != nil || !p.Alive() {
			continue // gone: GC's business, not an invalid pod
		}
		if reason, ok := broken[a.Key()]; ok {
			d.invalid(p, fmt.Sprintf("resource %s: %s", firstResource(a.Resources), reason))
			continue
		}
		if a.Netns == "" || a.ContainerID == "" || !a.StickyUntil.IsZero() {
			continue
		}
		err = d.checker.Check(ctx, cnicheck.Target{ContainerID: a.ContainerID, NetNS: a.Netns, IfName: a.IfName,
			PodNamespace: a.PodNamespace, PodName: a.PodName})
		switch {
		case err == nil:
		case errors.Is(err, cnicheck.ErrCheckFailed):
			d.invalid(p, fmt.Sprintf("CNI CHECK failed: %v", err))
		case errors.Is(err, cnicheck.ErrNotSetUp), errors.Is(err, cnicheck.ErrCheckUnsupported),
			errors.Is(err, cnicheck.ErrCheckDisabled), errors.Is(err, cnicheck.ErrNoConfig):
			d.log.Debug("cni check skipped", "pod", a.Key(), "why", err)
		default:
			d.log.Warn("cni check could not run", "pod", a.Key(), "err", err)
		}
	}
	return nil
}

func (d *Daemon) invalid(p k8s.Pod, msg string) {
	d.log.Warn("pod resource invalid", "pod", p.Key(), "reason", msg)
	d.kube.PodEvent(p.Namespace, p.Name, p.UID, k8s.Warning, "ResourceInvalid", msg)
}

func firstResource(rs []store.Resource) string {
	if len(rs) == 0 {
		return "(none)"
	}
	return rs[0].ID
}
