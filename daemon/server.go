package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/terway-sim/terway/daemon/ipam"
	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/rpc"
)

// maxRPC caps every RPC below kubelet's 2-minute CNI timeout, as Terway
// does (118 s); the plugin's own deadline is shorter still.
const maxRPC = 118 * time.Second

func (d *Daemon) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if !d.initialised.Load() && info.FullMethod != rpc.TerwayBackend_Status_FullMethodName {
		return nil, status.Error(codes.Unavailable, d.initialising())
	}
	ctx, cancel := context.WithTimeout(ctx, maxRPC)
	defer cancel()
	start := d.clock.Now()
	resp, err := h(ctx, req)
	d.metrics.rpc(info.FullMethod, d.clock.Since(start), err)
	return resp, err
}

// begin marks a pod busy. An AllocIP finding it busy fails at once with
// rpc.PodBusyError (Unavailable, "already processing" and a PodBusy
// detail), which the plugin answers with CNI code 11 (try again later);
// ReleaseIP and GetIPInfo wait their turn (a DEL never fails for that).
func (d *Daemon) begin(ctx context.Context, key string, wait bool) (func(), error) {
	for {
		d.mu.Lock()
		if !d.pending[key] {
			d.pending[key] = true
			d.mu.Unlock()
			return func() {
				d.mu.Lock()
				delete(d.pending, key)
				d.mu.Unlock()
			}, nil
		}
		d.mu.Unlock()
		if !wait {
			return nil, rpc.PodBusyError(key)
		}
		t := d.clock.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-t.C():
		}
	}
}

type backend struct {
	rpc.UnimplementedTerwayBackendServer
	d *Daemon
}

func podKey(ns, name string) (string, error) {
	if ns == "" || name == "" {
		return "", status.Error(codes.InvalidArgument, "K8SPodNamespace and K8SPodName are required")
	}
	return ns + "/" + name, nil
}

// MaxContainerIDLen bounds a container ID. Runtimes use 64 hex digits
// (containerd, CRI-O, Docker); the bound leaves room for others while
// keeping a store record and a log line small.
const MaxContainerIDLen = 128

// checkContainerID applies the CNI specification's rule for a container
// ID (a letter or digit, then letters, digits, '_', '.' or '-') and
// MaxContainerIDLen. AllocIP requires one (it is stored and tells a
// retried ADD from a new sandbox); ReleaseIP and GetIPInfo accept none.
func checkContainerID(id string, required bool) error {
	if id == "" {
		if required {
			return status.Error(codes.InvalidArgument, "K8SPodInfraContainerId is required")
		}
		return nil
	}
	if len(id) > MaxContainerIDLen {
		return status.Errorf(codes.InvalidArgument, "K8SPodInfraContainerId is %d bytes long, at most %d allowed", len(id), MaxContainerIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '.' || c == '-')
		if !ok {
			return status.Errorf(codes.InvalidArgument, "K8SPodInfraContainerId %q: want a letter or digit, then letters, digits, '_', '.' or '-'", id)
		}
	}
	return nil
}

// AllocIP gives a pod its network. A retried call for the same container
// gets the same answer; a new sandbox of the same pod gets the same
// address back.
func (b *backend) AllocIP(ctx context.Context, r *rpc.AllocIPRequest) (*rpc.AllocIPReply, error) {
	d := b.d
	start := d.clock.Now()
	key, err := podKey(r.K8SPodNamespace, r.K8SPodName)
	if err != nil {
		return nil, err
	}
	if err := checkContainerID(r.K8SPodInfraContainerId, true); err != nil {
		return nil, err
	}
	done, err := d.begin(ctx, key, false)
	if err != nil {
		return nil, err
	}
	defer done()
	pod, err := d.kube.Pod(ctx, r.K8SPodNamespace, r.K8SPodName)
	if err != nil {
		code := codes.Unavailable
		if k8s.IsNotFound(err) {
			code = codes.NotFound
		}
		return nil, status.Errorf(code, "alloc IP for %s: %v", key, err)
	}
	if att, err := d.store.Get(r.K8SPodNamespace, r.K8SPodName); err == nil && att.ContainerID == r.K8SPodInfraContainerId &&
		len(att.NetConf) > 0 && att.StickyUntil.IsZero() {
		if held, ok := d.holds(key); ok && len(att.Resources) > 0 && att.Resources[0].ID == held.resourceID() {
			reply := &rpc.AllocIPReply{}
			if err := protojson.Unmarshal(att.NetConf, reply); err == nil {
				return reply, nil // the same ADD again
			}
		}
	}
	// The allocation finishes even if the caller gives up (a retried ADD
	// then finds it done instead of starting over), but not if the daemon
	// stops.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), maxRPC)
	defer cancel()
	defer context.AfterFunc(d.life, cancel)()
	g, err := d.allocate(actx, pod)
	if err != nil {
		code := codes.Internal
		switch {
		case errors.Is(err, ipam.ErrNoCapacity), errors.Is(err, ipam.ErrInsufficientIPs), errors.Is(err, ipam.ErrNoExclusiveENI):
			code = codes.ResourceExhausted
		case errors.Is(err, ipam.ErrAddressLost):
			code = codes.FailedPrecondition
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			code = codes.DeadlineExceeded
		}
		d.kube.PodEvent(pod.Namespace, pod.Name, pod.UID, k8s.Warning, "AllocIPFailed", err.Error())
		return nil, status.Errorf(code, "alloc IP for %s: %v", key, err)
	}
	if d.cfg.EnableEIPPool {
		// Until the record is written (see sweepEIPs).
		d.eipBusy.Add(1)
		defer d.eipBusy.Add(-1)
	}
	eip, err := d.podEIP(actx, pod, g)
	if err != nil {
		d.kube.PodEvent(pod.Namespace, pod.Name, pod.UID, k8s.Warning, "AllocEIPFailed", err.Error())
		code := codes.Internal
		if errors.As(err, new(errBadEIPRequest)) {
			code = codes.InvalidArgument
		}
		// The address stays the pod's: a retried ADD gets it back, and a
		// pod that is gone gives it up through its DEL or GC.
		return nil, status.Errorf(code, "alloc EIP for %s: %v", key, err)
	}
	reply := &rpc.AllocIPReply{Success: true, IPType: g.ipType, IPv4: true, IPv6: g.ip.IPv6.IsValid(),
		NetConfs: []*rpc.NetConf{d.netConf(g.ip, pod)}}
	if err := d.record(pod, r, g, reply, eip); err != nil {
		if eip != nil {
			if derr := d.releaseEIPOf(store.Attachment{PodNamespace: pod.Namespace, PodName: pod.Name, Resources: []store.Resource{*eip}}, false); derr != nil {
				d.log.Error("eip: releasing the EIP of an unrecorded allocation failed; GC releases it", "pod", key, "err", derr)
			}
		}
		d.pool.Release(key, time.Time{})
		return nil, status.Errorf(codes.Internal, "alloc IP for %s: persist: %v", key, err)
	}
	d.kube.PodEvent(pod.Namespace, pod.Name, pod.UID, k8s.Normal, "AllocIPSucceed",
		fmt.Sprintf("Alloc IP %s took %v", g.ip.IPv4, d.clock.Since(start).Round(time.Millisecond)))
	d.podIPs.enqueue(pod, k8s.PodIPsValue(g.ip.IPv4, g.ip.IPv6)) // written later, off the reply path
	return reply, nil
}

// record persists what a pod got (its address, and its EIP when it has
// one), before the plugin hears of it.
func (d *Daemon) record(pod k8s.Pod, r *rpc.AllocIPRequest, g grant, reply *rpc.AllocIPReply, eip *store.Resource) error {
	raw, err := protojson.Marshal(reply)
	if err != nil {
		return err
	}
	ip := g.ip
	res := store.Resource{Type: g.resType, ID: g.resourceID(), ENIID: ip.ENIID, ENIMAC: ip.MAC, IPv4: ip.IPv4.String()}
	if ip.IPv6.IsValid() {
		res.IPv6 = ip.IPv6.String()
	}
	ifName := ifNameOrDefault(r.IfName)
	resources := []store.Resource{res}
	if eip != nil {
		resources = append(resources, *eip)
	}
	att := store.Attachment{PodNamespace: pod.Namespace, PodName: pod.Name, PodUID: pod.UID,
		ContainerID: r.K8SPodInfraContainerId, Netns: r.Netns, IfName: ifName, IPType: g.storeType,
		Resources: resources, NetConf: raw, CreatedAt: d.clock.Now()}
	info := store.PodInfo{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, IPType: g.storeType,
		Annotations: pod.Annotations, OwnerKinds: pod.OwnerKinds, StickyIP: pod.Sticky, Ingress: pod.Ingress,
		Egress: pod.Egress, SeenAt: d.clock.Now()}
	return d.store.Update(func(tx *store.Tx) error {
		if err := tx.Put(att); err != nil {
			return err
		}
		return tx.PutPod(info)
	})
}

func (d *Daemon) netConf(ip ipam.IP, pod k8s.Pod) *rpc.NetConf {
	set := func(v4, v6 fmt.Stringer, ok6 bool) *rpc.IPSet {
		s := &rpc.IPSet{IPv4: v4.String()}
		if ok6 {
			s.IPv6 = v6.String()
		}
		return s
	}
	dual := ip.IPv6.IsValid()
	nc := &rpc.NetConf{
		BasicInfo: &rpc.BasicInfo{
			PodIP:     set(ip.IPv4, ip.IPv6, dual),
			PodCIDR:   set(ip.CIDR4, ip.CIDR6, dual),
			GatewayIP: set(ip.Gateway4, ip.Gateway6, dual),
		},
		Pod:          &rpc.Pod{Ingress: pod.Ingress, Egress: pod.Egress, NetworkPriority: pod.NetworkPriority},
		DefaultRoute: true,
	}
	if ip.MAC != "" {
		nc.ENIInfo = &rpc.ENIInfo{MAC: ip.MAC, GatewayIP: set(ip.Gateway4, ip.Gateway6, dual)}
	}
	if d.cfg.ServiceCIDRv4.IsValid() || d.cfg.ServiceCIDRv6.IsValid() {
		nc.BasicInfo.ServiceCIDR = &rpc.IPSet{}
		if d.cfg.ServiceCIDRv4.IsValid() {
			nc.BasicInfo.ServiceCIDR.IPv4 = d.cfg.ServiceCIDRv4.String()
		}
		if d.cfg.ServiceCIDRv6.IsValid() {
			nc.BasicInfo.ServiceCIDR.IPv6 = d.cfg.ServiceCIDRv6.String()
		}
	}
	for _, r := range d.cfg.ExtraRoutes {
		nc.ExtraRoutes = append(nc.ExtraRoutes, &rpc.Route{Dst: r.Dst})
	}
	return nc
}

// waitPod checks a ReleaseIP's or GetIPInfo's pod and container ID (the
// latter may be empty) and waits its turn on the pod: its key, and done to
// call when the request ends.
func (d *Daemon) waitPod(ctx context.Context, namespace, name, containerID string) (string, func(), error) {
	key, err := podKey(namespace, name)
	if err != nil {
		return "", nil, err
	}
	if err := checkContainerID(containerID, false); err != nil {
		return "", nil, err
	}
	done, err := d.begin(ctx, key, true)
	if err != nil {
		return "", nil, err
	}
	return key, done, nil
}

// ReleaseIP gives a pod's network back. It is idempotent; a release for a
// container other than the one that holds the address is a no-op (a late
// DEL of an old sandbox must not take the new one's address); a sticky
// pod's address stays reserved for the stick time.
func (b *backend) ReleaseIP(ctx context.Context, r *rpc.ReleaseIPRequest) (*rpc.ReleaseIPReply, error) {
	d := b.d
	key, done, err := d.waitPod(ctx, r.K8SPodNamespace, r.K8SPodName, r.K8SPodInfraContainerId)
	if err != nil {
		return nil, err
	}
	defer done()
	att, err := d.store.Get(r.K8SPodNamespace, r.K8SPodName)
	if errors.Is(err, store.ErrNotFound) {
		return &rpc.ReleaseIPReply{Success: true}, nil
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "release IP of %s: %v", key, err)
	}
	if r.K8SPodInfraContainerId != "" && att.ContainerID != "" && att.ContainerID != r.K8SPodInfraContainerId {
		d.log.Info("release for an old sandbox ignored", "pod", key, "container", r.K8SPodInfraContainerId, "holder", att.ContainerID)
		return &rpc.ReleaseIPReply{Success: true}, nil
	}
	if err := d.releaseAttachment(att, d.isSticky(att)); err != nil {
		return nil, status.Errorf(codes.Internal, "release IP of %s: %v", key, err)
	}
	reply := &rpc.ReleaseIPReply{Success: true, IPv4: true}
	if len(att.Resources) > 0 {
		reply.IPv4Addr = &rpc.IPSet{IPv4: att.Resources[0].IPv4, IPv6: att.Resources[0].IPv6}
		reply.IPv6 = att.Resources[0].IPv6 != ""
	}
	return reply, nil
}

// isSticky reports whether the pod keeps its address after release.
func (d *Daemon) isSticky(att store.Attachment) bool {
	if d.sticky <= 0 {
		return false
	}
	p, err := d.store.GetPod(att.PodNamespace, att.PodName)
	return err == nil && p.StickyIP
}

// releaseAttachment returns a pod's address to the pool: reserved for the
// stick time (record kept with StickyUntil) or at once (record deleted).
func (d *Daemon) releaseAttachment(att store.Attachment, sticky bool) error {
	key := att.Key()
	if err := d.releaseEIPOf(att, sticky); err != nil {
		return err // the record stays: the next DEL or GC tries again
	}
	if sticky {
		until := d.clock.Now().Add(d.sticky)
		att.StickyUntil = until
		att.ContainerID = ""
		if err := d.store.Put(att); err != nil {
			return err
		}
		d.pool.Release(key, until)
		return nil
	}
	err := d.store.Update(func(tx *store.Tx) error {
		if err := tx.Delete(att.PodNamespace, att.PodName); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := tx.DeletePod(att.PodNamespace, att.PodName); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.pool.Release(key, time.Time{})
	return nil
}

// GetIPInfo answers what AllocIP answered for the pod's current
// container.
func (b *backend) GetIPInfo(ctx context.Context, r *rpc.GetInfoRequest) (*rpc.GetInfoReply, error) {
	d := b.d
	key, done, err := d.waitPod(ctx, r.K8SPodNamespace, r.K8SPodName, r.K8SPodInfraContainerId)
	if err != nil {
		return nil, err
	}
	defer done()
	att, err := d.store.Get(r.K8SPodNamespace, r.K8SPodName)
	if errors.Is(err, store.ErrNotFound) || (err == nil && r.K8SPodInfraContainerId != "" && att.ContainerID != r.K8SPodInfraContainerId) {
		return &rpc.GetInfoReply{Success: false, IPType: d.defaultIPType()}, nil
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "ip info of %s: %v", key, err)
	}
	alloc := &rpc.AllocIPReply{}
	if err := protojson.Unmarshal(att.NetConf, alloc); err != nil {
		return nil, status.Errorf(codes.Internal, "ip info of %s: stored answer: %v", key, err)
	}
	return &rpc.GetInfoReply{Success: true, IPType: alloc.IPType, IPv4: alloc.IPv4, IPv6: alloc.IPv6, NetConfs: alloc.NetConfs}, nil
}

// RecordEvent records a Kubernetes event for the plugin.
func (b *backend) RecordEvent(ctx context.Context, r *rpc.EventRequest) (*rpc.EventReply, error) {
	d := b.d
	t := k8s.Normal
	if r.EventType == rpc.EventType_EventTypeWarning {
		t = k8s.Warning
	}
	if r.EventTarget == rpc.EventTarget_EventTargetNode {
		d.kube.NodeEvent(t, r.Reason, r.Message)
		return &rpc.EventReply{Succeed: true}, nil
	}
	uid := ""
	if p, err := d.kube.Pod(ctx, r.K8SPodNamespace, r.K8SPodName); err == nil {
		uid = p.UID
	} else if a, err := d.store.Get(r.K8SPodNamespace, r.K8SPodName); err == nil {
		uid = a.PodUID
	}
	d.kube.PodEvent(r.K8SPodNamespace, r.K8SPodName, uid, t, r.Reason, r.Message)
	return &rpc.EventReply{Succeed: true}, nil
}

// defaultIPType is the network type of the daemon's mode.
func (d *Daemon) defaultIPType() rpc.IPType {
	switch d.mode {
	case mode.ENIOnly:
		return rpc.IPType_TypeVPCENI
	case mode.VPC:
		return rpc.IPType_TypeVPCIP
	}
	return rpc.IPType_TypeENIMultiIP
}
