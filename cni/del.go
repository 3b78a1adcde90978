package cni

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/rpc"
)

// cmdDel removes a pod interface and gives its address back. It is
// idempotent, works with an empty or vanished netns, and succeeds with
// the daemon down: the host is cleaned from the state file (or the
// daemon's record, or prevResult) and the daemon's GC reclaims the
// address later.
func (p *plugin) cmdDel(ctx context.Context, inv *invocation) error {
	source := "state file"
	att, err := inv.state.load(inv.args.ContainerID, inv.args.IfName)
	switch {
	case errors.Is(err, errNoState):
		att = nil
	case err != nil:
		inv.log.Warn("state file unreadable, tearing down from other sources", "err", err)
		att = nil
	}
	pod := inv.pod
	if att != nil && att.Pod.Known() {
		pod = att.Pod
	}

	client, dialErr := dialDaemon(ctx, inv.conf.SocketPath)
	if dialErr == nil {
		defer client.Close()
	}
	if att == nil {
		att, source = inv.recoverAttachment(ctx, client, dialErr)
	}
	start := time.Now()
	var tornDown, released time.Duration
	if att != nil {
		spec := *att.Spec
		// The runtime's netns, not the one ADD saw: empty on containerd's
		// second DEL, when only the host side is left. An exclusive ENI is
		// the exception: while the namespace ADD saw still exists, the ENI
		// is in it and must come back to the node.
		recorded := spec.PodNetNS
		spec.PodNetNS = inv.args.Netns
		if spec.Kind == datapath.ExclusiveENI && inv.args.Netns == "" && isNetNS(recorded) {
			spec.PodNetNS = recorded
		}
		specs := []*datapath.Spec{&spec}
		if twin := inv.fallbackTwin(spec, source); twin != nil {
			specs = append(specs, twin)
		}
		for _, s := range specs {
			if err := inv.teardownDeferred(ctx, s); err != nil {
				inv.log.Error("datapath teardown failed", "err", err)
				return types.NewError(types.ErrInternal, fmt.Sprintf("DEL pod %s: tear down %s datapath: %v", pod, s.Kind, err), "")
			}
		}
	}
	tornDown = time.Since(start)
	if err := inv.release(ctx, client, dialErr, pod, att); err != nil {
		return err
	}
	released = time.Since(start) - tornDown
	if err := inv.state.remove(inv.args.ContainerID, inv.args.IfName); err != nil {
		return types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	inv.log.Info("pod network removed", "from", source, "teardown", tornDown, "release", released)
	if att != nil {
		if err := inv.p.reap(inv.p.hostNetNS); err != nil {
			inv.log.Warn("reaping retired host veths (the next DEL or GC retries)", "err", err)
		}
	}
	return nil
}

// fallbackTwin is, for a DEL that rebuilt the attachment from the
// daemon's record or prevResult of a pod whose config asks for IPVlan,
// the other datapath the ADD may have built: IPVlan, or PolicyRoute after
// a fallback. Without the state file nothing says which it was; tearing
// down what is not there changes nothing.
func (inv *invocation) fallbackTwin(spec datapath.Spec, source string) *datapath.Spec {
	if source == "state file" || inv.conf.VirtualType != VirtualIPVlan {
		return nil
	}
	switch spec.Kind {
	case datapath.IPVlan:
		spec.Kind = datapath.PolicyRoute
	case datapath.PolicyRoute:
		spec.Kind = datapath.IPVlan
	default:
		return nil
	}
	return &spec
}

// release gives the address back to the daemon. A daemon that is down,
// late or busy with the pod does not fail the DEL: its GC reclaims what a
// DEL could not release.
func (inv *invocation) release(ctx context.Context, client *daemonClient, dialErr error, pod PodID, att *attachment) error {
	if !pod.Known() {
		inv.log.Info("pod unknown (no CNI_ARGS, no state): nothing to release")
		return nil
	}
	if dialErr != nil {
		inv.log.Warn("daemon unreachable; host cleaned, the daemon's GC reclaims the address", "err", dialErr)
		return nil
	}
	req := &rpc.ReleaseIPRequest{K8SPodName: pod.Name, K8SPodNamespace: pod.Namespace,
		K8SPodInfraContainerId: pod.InfraContainerID, Reason: releaseReasonNormal}
	if att != nil {
		fillRelease(req, att.Spec)
		if t, ok := rpc.IPType_value[att.IPType]; ok {
			req.IPType = rpc.IPType(t)
		}
	}
	_, err := client.ReleaseIP(ctx, req)
	switch {
	case err == nil:
		return nil
	case daemonDown(err) || isProcessing(err):
		inv.log.Warn("ReleaseIP not done; the daemon's GC reclaims the address", "err", err)
		return nil
	}
	inv.log.Error("ReleaseIP failed", "err", err)
	return rpcError("ReleaseIP", pod, err)
}

// recoverAttachment rebuilds what ADD set up when the state file is
// missing (an ADD by another plugin version, a lost state dir): from the
// daemon's record when it still ties the pod to this container, else,
// with the daemon down, from prevResult. With the daemon up and no record
// there is nothing of this container's left to undo.
func (inv *invocation) recoverAttachment(ctx context.Context, client *daemonClient, dialErr error) (*attachment, string) {
	if dialErr == nil {
		if !inv.pod.Known() {
			return nil, "nothing"
		}
		reply, err := client.GetIPInfo(ctx, &rpc.GetInfoRequest{K8SPodName: inv.pod.Name, K8SPodNamespace: inv.pod.Namespace,
			K8SPodInfraContainerId: inv.pod.InfraContainerID})
		if err != nil {
			inv.log.Warn("no state file and GetIPInfo failed: host side left to the daemon's GC", "err", err)
			return nil, "nothing"
		}
		if !reply.GetSuccess() {
			inv.log.Info("no state file and the daemon holds nothing for this container: nothing to tear down")
			return nil, "nothing"
		}
		att, err := inv.attachmentFromReply(reply.IPType, reply.NetConfs)
		if err != nil {
			inv.log.Warn("no state file and the daemon's record does not build a spec", "err", err)
			return nil, "nothing"
		}
		inv.log.Info("no state file: tearing down from the daemon's record")
		return att, "daemon record"
	}
	att := inv.attachmentFromPrevResult()
	if att == nil {
		return nil, "nothing"
	}
	inv.log.Warn("no state file and the daemon unreachable: tearing down from prevResult", "ipv4", att.Spec.IPv4, "ipv6", att.Spec.IPv6)
	return att, "prevResult"
}

func (inv *invocation) attachmentFromReply(ipType rpc.IPType, ncs []*rpc.NetConf) (*attachment, error) {
	nc, err := pickNetConf(ncs, inv.args.IfName)
	if err != nil {
		return nil, err
	}
	// No probe and no event here: an IPVlan request may have fallen back
	// to PolicyRoute, whose remains cmdDel removes too (fallbackTwin).
	kind, _, err := SelectKind(ipType, nc.ENIInfo, inv.conf.VirtualType, func() error { return nil })
	if err != nil {
		return nil, err
	}
	spec, err := BuildSpec(SpecInput{Config: inv.conf, Kind: kind, NetConf: nc, Pod: inv.pod,
		HostNetNS: inv.p.hostNetNS, PodNetNS: inv.args.Netns, IfName: inv.args.IfName})
	if err != nil {
		return nil, err
	}
	return &attachment{ContainerID: inv.args.ContainerID, IfName: inv.args.IfName, Pod: inv.pod, IPType: ipType.String(), Spec: spec}, nil
}

// attachmentFromPrevResult is the last resort: a veth datapath with the
// addresses of prevResult and the host veth it names (or the name the
// pod's identity gives).
func (inv *invocation) attachmentFromPrevResult() *attachment {
	prev := inv.conf.Net.PrevResult
	if prev == nil {
		return nil
	}
	res, err := current.NewResultFromResult(prev)
	if err != nil {
		inv.log.Warn("prevResult unusable", "err", err)
		return nil
	}
	spec := &datapath.Spec{Kind: datapath.PolicyRoute, HostNetNS: inv.p.hostNetNS, PodNetNS: inv.args.Netns,
		IfName: inv.args.IfName, MTU: inv.conf.MTU}
	for _, ip := range res.IPs {
		a, ok := netip.AddrFromSlice(ip.Address.IP)
		if !ok {
			continue
		}
		a = a.Unmap()
		switch {
		case a.Is4() && !spec.IPv4.IsValid():
			spec.IPv4 = a
		case a.Is6() && !spec.IPv6.IsValid():
			spec.IPv6 = a
		}
	}
	for _, ifc := range res.Interfaces {
		if ifc.Sandbox == "" && ifc.Name != "" {
			spec.HostVeth = ifc.Name
			break
		}
	}
	if spec.HostVeth == "" && inv.pod.Known() {
		spec.HostVeth = hostVethName(inv.conf.VethPrefix, inv.pod, inv.args.IfName)
	}
	if !spec.IPv4.IsValid() && !spec.IPv6.IsValid() {
		return nil
	}
	return &attachment{ContainerID: inv.args.ContainerID, IfName: inv.args.IfName, Pod: inv.pod, Spec: spec}
}

// isNetNS reports whether path still names a network namespace (not
// one of another kind: ns.GetNS accepts any namespace file).
func isNetNS(path string) bool {
	return path != "" && datapath.CheckNetNS(path) == nil
}
