package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"time"

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/store"
)

// EIPs per pod (enable_eip_pool): a pod that asks for one gets an elastic
// IP bound to its address during AllocIP, recorded with the address as a
// second resource of its attachment (store.ResourceEIP). The daemon
// releases with the pod the EIPs it allocated (owned); a user's EIP
// (pod-eip-instanceid) is only unbound. A sticky pod keeps its EIP bound
// while its address is reserved, and a re-created one finds it there.
//
// Nothing the daemon allocates is unknown to it for long: an EIP is
// allocated with a ClientToken journalled under the pod's key and UID (a
// retried AllocIP of the same daemon gets the same EIP back; a restarted
// daemon drops the journal's intents), and named eipName at once, so GC
// finds one that no record explains (a lost answer before a restart, or a
// crash between the cloud's answer and the record) and releases it.

// eipTimeout bounds the cloud calls of one EIP release.
const eipTimeout = 90 * time.Second

// eipName marks the EIPs this node's daemon allocates.
func (d *Daemon) eipName() string { return "terway-" + d.node.Instance.ID }

// attachEIP gives pod the EIP it asks for, bound to the address of g, and
// returns its record. prev is the pod's EIP record from an earlier sandbox
// (sticky), if any.
func (d *Daemon) attachEIP(ctx context.Context, pod k8s.Pod, req k8s.EIPRequest, g grant, prev *store.Resource) (store.Resource, error) {
	api := d.node.API
	eni, private := g.ip.ENIID, g.ip.IPv4
	var e cloud.EIP
	owned, fresh := false, false
	var err error
	switch {
	case req.ID != "":
		if e, err = api.DescribeEIP(ctx, req.ID); err != nil {
			return store.Resource{}, err
		}
		if err := d.unbindElsewhere(ctx, e, eni, private, bool(d.cfg.AllowEIPRob)); err != nil {
			return store.Resource{}, err
		}
		d.dropTaken(ctx, e.ID, pod.Key())
	case prev != nil && prev.EIP.Owned:
		e, err = api.DescribeEIP(ctx, prev.ID)
		if errors.Is(err, cloud.ErrEIPNotFound) {
			d.log.Warn("eip: the pod's EIP is gone; allocating another", "pod", pod.Key(), "eip", prev.ID)
			prev = nil
			break
		}
		if err != nil {
			return store.Resource{}, err
		}
		if err := d.unbindElsewhere(ctx, e, eni, private, true); err != nil {
			return store.Resource{}, err
		}
		owned = true
	}
	if e.ID == "" {
		if e, err = d.allocateEIP(ctx, pod, req); err != nil {
			return store.Resource{}, err
		}
		owned, fresh = true, true
	}
	res := store.Resource{Type: store.ResourceEIP, ID: e.ID, ENIID: eni,
		EIP: &store.EIPInfo{Address: e.Address.String(), PrivateIP: private.String(), Owned: owned}}
	if prev != nil && prev.ID == e.ID {
		res.EIP.BandwidthPackageID = prev.EIP.BandwidthPackageID
	}
	if err := d.bindEIP(ctx, e, req, &res, eni, private); err != nil {
		if fresh {
			if rerr := d.detachEIP(ctx, res); rerr != nil {
				d.log.Error("eip: rollback of a new EIP failed; GC releases it", "pod", pod.Key(), "eip", e.ID, "err", rerr)
			}
		}
		return store.Resource{}, err
	}
	return res, nil
}

// allocateEIP allocates and marks an EIP for pod.
func (d *Daemon) allocateEIP(ctx context.Context, pod k8s.Pod, req k8s.EIPRequest) (cloud.EIP, error) {
	api := d.node.API
	e, err := api.AllocateEIP(ctx, cloud.AllocateEIPRequest{IntentKey: "eip/" + pod.Key() + "/" + pod.UID,
		Bandwidth: req.Bandwidth, InternetChargeType: req.InternetChargeType, ISP: req.ISP,
		Name: d.eipName(), Description: "pod " + pod.Key()})
	if err != nil {
		return cloud.EIP{}, err
	}
	_, owner, err := d.ownershipTags()
	if err == nil {
		err = api.TagEIP(ctx, e.ID, maps.Clone(owner))
	}
	if err != nil {
		// The name marks it already; tags are for people.
		d.log.Warn("eip: tagging a new EIP failed", "eip", e.ID, "err", err)
	}
	return e, nil
}

// unbindElsewhere unbinds an EIP from whatever else holds it, when take
// allows it: a user's EIP with allow_eip_rob, or the pod's own EIP still
// bound to its earlier address.
func (d *Daemon) unbindElsewhere(ctx context.Context, e cloud.EIP, eni string, private netip.Addr, take bool) error {
	if e.InstanceID == "" || (e.InstanceID == eni && e.PrivateIP == private) {
		return nil
	}
	if !take {
		return fmt.Errorf("EIP %s is bound to %s %s %s; allow_eip_rob is off", e.ID, e.InstanceType, e.InstanceID, e.PrivateIP)
	}
	d.log.Info("eip: unbinding an EIP bound elsewhere", "eip", e.ID, "from", e.InstanceID, "ip", e.PrivateIP)
	if err := d.node.API.UnassociateEIPFrom(ctx, e.ID, e.InstanceType, e.InstanceID, e.PrivateIP); err != nil {
		return err
	}
	_, err := d.node.API.WaitEIPStatus(ctx, e.ID, cloud.EIPAvailable)
	return err
}

// bindEIP puts e into the asked bandwidth package and binds it to private
// of eni, waiting until it forwards.
func (d *Daemon) bindEIP(ctx context.Context, e cloud.EIP, req k8s.EIPRequest, res *store.Resource, eni string, private netip.Addr) error {
	api := d.node.API
	if pkg := req.BandwidthPackageID; pkg != "" && res.EIP.Owned && e.BandwidthPackageID != pkg {
		if err := api.AddEIPToBandwidthPackage(ctx, pkg, e.ID); err != nil {
			return err
		}
		res.EIP.BandwidthPackageID = pkg
	}
	if e.InstanceID != eni || e.PrivateIP != private || (e.Status != cloud.EIPInUse && e.Status != cloud.EIPAssociating) {
		if e.Status == cloud.EIPUnassociating {
			if _, err := api.WaitEIPStatus(ctx, e.ID, cloud.EIPAvailable); err != nil {
				return err
			}
		}
		if err := api.AssociateEIP(ctx, e.ID, eni, private); err != nil {
			return err
		}
	}
	_, err := api.WaitEIPStatus(ctx, e.ID, cloud.EIPInUse)
	return err
}

// detachEIP unbinds a pod's EIP, waiting until the binding is gone (the
// pod's address cannot be unassigned before), and, when the daemon owns
// it, takes it out of its bandwidth package and releases it.
func (d *Daemon) detachEIP(ctx context.Context, res store.Resource) error {
	api := d.node.API
	var private netip.Addr
	if res.EIP != nil {
		private, _ = netip.ParseAddr(res.EIP.PrivateIP)
	}
	if err := api.UnassociateEIP(ctx, res.ID, res.ENIID, private); err != nil {
		return err
	}
	if err := api.WaitEIPUnbound(ctx, res.ID, res.ENIID, private); err != nil {
		return err
	}
	if res.EIP == nil || !res.EIP.Owned {
		return nil
	}
	if pkg := res.EIP.BandwidthPackageID; pkg != "" {
		if err := api.RemoveEIPFromBandwidthPackage(ctx, pkg, res.ID); err != nil {
			return err
		}
	}
	return api.ReleaseEIP(ctx, res.ID)
}

// releaseEIPOf releases an attachment's EIP as its address goes: bound on
// while a sticky pod's address is reserved, else unbound (and released
// when owned). With the daemon stopping, the cloud calls end and the
// record stays for the next one.
func (d *Daemon) releaseEIPOf(att store.Attachment, sticky bool) error {
	res, ok := att.EIP()
	if !ok || sticky {
		return nil
	}
	ctx, cancel := context.WithTimeout(d.life, eipTimeout)
	defer cancel()
	if err := d.detachEIP(ctx, res); err != nil {
		return fmt.Errorf("release EIP %s of %s: %w", res.ID, att.Key(), err)
	}
	return nil
}

// sweepEIPs releases the EIPs this daemon allocated that no record
// explains: an AllocIP that died between the cloud's answer and its
// record, or a record lost with the store. The order matters: the cloud's
// list first, then no allocation in flight (AllocIP counts itself in
// eipBusy from before it allocates until its record is written), then the
// store. An EIP listed was allocated before; if its AllocIP is not in
// flight any more, its record is in the store by now.
func (d *Daemon) sweepEIPs(ctx context.Context) error {
	if !d.cfg.EnableEIPPool {
		return nil
	}
	all, err := d.node.API.DescribeEIPs(ctx, cloud.EIPFilter{})
	if err != nil {
		return err
	}
	if err := d.reconcileEIPs(ctx, all); err != nil {
		return err
	}
	if d.eipBusy.Load() > 0 {
		return nil
	}
	atts, err := d.store.List()
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, a := range atts {
		if r, ok := a.EIP(); ok {
			known[r.ID] = true
		}
	}
	var errs []error
	for _, e := range all {
		if e.Name != d.eipName() || known[e.ID] {
			continue
		}
		d.log.Warn("gc: releasing an EIP this node allocated that no record explains", "eip", e.ID, "address", e.Address, "bound", e.InstanceID)
		res := store.Resource{Type: store.ResourceEIP, ID: e.ID, ENIID: e.InstanceID,
			EIP: &store.EIPInfo{Owned: true, BandwidthPackageID: e.BandwidthPackageID}}
		if err := d.detachEIP(ctx, res); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// podEIP gives pod the EIP its annotations ask for (enable_eip_pool), for
// the address g: its record, or nil when the pod asks for none (an EIP
// its earlier sandbox had is then let go).
func (d *Daemon) podEIP(ctx context.Context, pod k8s.Pod, g grant) (*store.Resource, error) {
	if !d.cfg.EnableEIPPool {
		return nil, nil
	}
	req, err := k8s.PodEIP(pod.Annotations)
	if err != nil {
		return nil, errBadEIPRequest{err}
	}
	var prev *store.Resource
	if att, err := d.store.Get(pod.Namespace, pod.Name); err == nil {
		if r, ok := att.EIP(); ok {
			prev = &r
		}
	}
	if req.Wanted && g.ip.ENIID == "" {
		return nil, errBadEIPRequest{fmt.Errorf("the pod asks for an EIP (%s) but its address %s is on no ENI (VPC mode): EIPs need ENIMultiIP or an exclusive ENI",
			k8s.AnnotationPodWithEIP, g.ip.IPv4)}
	}
	if !req.Wanted {
		if prev != nil {
			if err := d.detachEIP(ctx, *prev); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	res, err := d.attachEIP(ctx, pod, req, g, prev)
	if err != nil {
		return nil, err
	}
	if _, err := d.kube.PatchPodAnnotation(ctx, pod.Namespace, pod.Name, pod.UID, k8s.AnnotationAllocatedEIP, res.EIP.Address); err != nil {
		d.log.Warn("eip: writing the pod's EIP annotation failed", "pod", pod.Key(), "eip", res.EIP.Address, "err", err)
	}
	return &res, nil
}

// errBadEIPRequest is a pod's malformed EIP annotation.
type errBadEIPRequest struct{ error }

func (e errBadEIPRequest) Unwrap() error { return e.error }

// foundEIP is the EIP the cloud has bound to g's address, as a record:
// for a holding rebuilt without its store record, whose EIP would
// otherwise look unexplained to sweepEIPs. One this node allocated (its
// name) is owned. Nil when there is none or the cloud cannot say.
func (d *Daemon) foundEIP(g grant) *store.Resource {
	if !d.cfg.EnableEIPPool || g.ip.ENIID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(d.life, eipTimeout)
	defer cancel()
	l, err := d.node.API.DescribeEIPs(ctx, cloud.EIPFilter{ENIID: g.ip.ENIID})
	if err != nil {
		d.log.Warn("restore: cannot ask the cloud for the EIP of a rebuilt holding", "ip", g.ip.IPv4, "err", err)
		return nil
	}
	for _, e := range l {
		if e.PrivateIP == g.ip.IPv4 {
			return &store.Resource{Type: store.ResourceEIP, ID: e.ID, ENIID: g.ip.ENIID, EIP: &store.EIPInfo{
				Address: e.Address.String(), PrivateIP: e.PrivateIP.String(), Owned: e.Name == d.eipName(),
				BandwidthPackageID: e.BandwidthPackageID}}
		}
	}
	return nil
}

// reconcileEIPs drops from the records the user EIPs (pod-eip-instanceid)
// that the cloud no longer binds to their pod: released by their owner,
// or taken by a pod elsewhere with allow_eip_rob. Such a record would
// otherwise claim an EIP another pod holds, and its release would look
// for a binding that is not there. The daemon's own EIPs are left: only
// the daemon moves them. all is the account's EIPs (sweepEIPs' list).
func (d *Daemon) reconcileEIPs(ctx context.Context, all []cloud.EIP) error {
	atts, err := d.store.List()
	if err != nil {
		return err
	}
	where := map[string]cloud.EIP{}
	for _, e := range all {
		where[e.ID] = e
	}
	var errs []error
	for _, a := range atts {
		r, ok := a.EIP()
		if !ok || r.EIP.Owned {
			continue
		}
		e, found := where[r.ID]
		if found && e.InstanceID == r.ENIID && e.PrivateIP.String() == r.EIP.PrivateIP {
			continue
		}
		errs = append(errs, d.dropEIP(ctx, a.Key(), r.ID, e, found))
	}
	return errors.Join(errs...)
}

// dropTaken drops a user EIP the pod thief has just taken from the
// records of this node's other pods at once (GC's reconcileEIPs does it
// for the pods of other nodes, and retries here what could not be done
// now).
func (d *Daemon) dropTaken(ctx context.Context, id, thief string) {
	atts, err := d.store.List()
	if err != nil {
		return
	}
	for _, a := range atts {
		if r, ok := a.EIP(); ok && r.ID == id && a.Key() != thief {
			if err := d.dropEIP(ctx, a.Key(), id, cloud.EIP{}, true); err != nil {
				d.log.Warn("eip: dropping a taken EIP from its former pod's record failed; GC retries", "pod", a.Key(), "err", err)
			}
		}
	}
}

// dropEIP removes EIP id from the record of pod key, with the pod's turn
// taken and the record read again.
func (d *Daemon) dropEIP(ctx context.Context, key, id string, now cloud.EIP, found bool) error {
	done, err := d.begin(ctx, key, false)
	if err != nil {
		return nil // an RPC is working on the pod; next round
	}
	defer done()
	ns, name, _ := strings.Cut(key, "/")
	att, err := d.store.Get(ns, name)
	if err != nil {
		return nil // released meanwhile
	}
	kept := att.Resources[:0:0]
	for _, r := range att.Resources {
		if r.Type != store.ResourceEIP || r.ID != id {
			kept = append(kept, r)
		}
	}
	if len(kept) == len(att.Resources) {
		return nil
	}
	att.Resources = kept
	if err := d.store.Put(att); err != nil {
		return err
	}
	why := "released by its owner"
	switch {
	case found && now.ID == "":
		why = "taken by another pod of the node (allow_eip_rob)"
	case found:
		why = fmt.Sprintf("bound to %s %s now", now.InstanceID, now.PrivateIP)
	}
	d.log.Warn("gc: a pod's EIP is not its own any more; dropped from its record", "pod", key, "eip", id, "why", why)
	d.kube.PodEvent(ns, name, att.PodUID, k8s.Warning, "EIPLost", fmt.Sprintf("EIP %s is no longer bound to the pod: %s", id, why))
	return nil
}
