package cni

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/rpc"
)

// Reasons the plugin gives the daemon and the pod's events.
const (
	releaseReasonNormal   = "normal release"
	releaseReasonRollback = "roll back ip for error: "
	eventVirtualMode      = "VirtualModeChanged"
	// eventVLANUnsupported tells a trunk member's pod why its ADD fails
	// on a kernel without 802.1Q (no fallback: see ErrVLANUnsupported).
	eventVLANUnsupported = "VLANUnsupported"
)

// addPhases are the parts of an ADD that take time: waiting for the
// container's lock, the daemon's AllocIP, waiting for the node's
// datapath lock, and the datapath setup under it.
type addPhases struct {
	lockWait, alloc, datapathLockWait, datapath time.Duration
}

// cmdAdd: AllocIP from the daemon, build the datapath, print the result.
// A retried ADD gets the same address from the daemon and Setup repairs
// whatever is missing, so it yields the same result.
func (p *plugin) cmdAdd(ctx context.Context, inv *invocation) error {
	if !inv.pod.Known() {
		return types.NewError(types.ErrInvalidEnvironmentVariables,
			"CNI_ARGS lacks K8S_POD_NAMESPACE and K8S_POD_NAME: terwayd allocates per Kubernetes pod", "")
	}
	// Before anything is allocated or written: a namespace file of
	// another kind would leave a state file no DEL could act on.
	if err := checkPodNetNS(inv.args.Netns); err != nil {
		return err
	}
	// Locked only now, so that a refused ADD leaves no lock file.
	t0 := time.Now()
	if err := inv.lockContainer(ctx, keepLock); err != nil {
		return err
	}
	inv.phases.lockWait = time.Since(t0)

	client, err := dialDaemon(ctx, inv.conf.SocketPath)
	if err != nil {
		inv.log.Error("daemon unreachable", "socket", inv.conf.SocketPath, "err", err)
		return rpcError("AllocIP", inv.pod, err)
	}
	defer client.Close()
	start := time.Now()
	reply, err := client.AllocIP(ctx, &rpc.AllocIPRequest{
		K8SPodName: inv.pod.Name, K8SPodNamespace: inv.pod.Namespace, K8SPodInfraContainerId: inv.pod.InfraContainerID,
		Netns: inv.args.Netns, IfName: inv.args.IfName,
	})
	if err != nil {
		inv.log.Error("AllocIP failed", "err", err, "took", time.Since(start))
		return rpcError("AllocIP", inv.pod, err)
	}
	if !reply.GetSuccess() {
		return types.NewError(types.ErrInternal, fmt.Sprintf("AllocIP for pod %s: daemon answered without success", inv.pod), "")
	}
	inv.phases.alloc = time.Since(start)
	inv.log.Debug("AllocIP answered", "ipType", reply.IPType, "took", inv.phases.alloc)

	att, result, err := inv.setup(ctx, client, reply)
	if errors.Is(err, datapath.ErrVLANUnsupported) {
		inv.recordEvent(ctx, client, rpc.EventType_EventTypeWarning, eventVLANUnsupported,
			"the pod's member ENI needs 802.1Q VLAN links, which this node's kernel lacks; there is no fallback: "+err.Error())
	}
	if err != nil {
		inv.rollback(client, reply.IPType, att, err)
		var te *types.Error
		if errors.As(err, &te) {
			return te
		}
		return types.NewError(types.ErrInternal, fmt.Sprintf("ADD pod %s: %v", inv.pod, err), "")
	}
	ph := inv.phases
	inv.log.Info("pod network set up", "kind", att.Spec.Kind, "ipv4", att.Spec.IPv4, "ipv6", att.Spec.IPv6,
		"hostVeth", att.Spec.HostVeth, "lockWait", ph.lockWait, "alloc", ph.alloc, "datapathLockWait", ph.datapathLockWait,
		"datapath", ph.datapath, "took", time.Since(start), "total", time.Since(inv.begun))
	return inv.printResult(result)
}

// checkPodNetNS refuses a CNI_NETNS that exists but is no network
// namespace (a UTS namespace file, a regular file): code 8, naming it. A
// path that does not exist is left to Setup, whose failure rolls back.
func checkPodNetNS(path string) error {
	err := datapath.CheckNetNS(path)
	var notExist ns.NSPathNotExistErr
	if err == nil || errors.As(err, &notExist) {
		return nil
	}
	var other *datapath.OtherNSKindError
	if errors.As(err, &other) {
		return types.NewError(types.ErrInvalidNetNS, "CNI_NETNS "+other.Error(), "")
	}
	return types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("CNI_NETNS %s is not a network namespace: %v", path, err), "")
}

// setup builds the Spec, persists it, then builds the datapath. The
// attachment is returned also on error, once it exists, for the rollback.
func (inv *invocation) setup(ctx context.Context, client *daemonClient, reply *rpc.AllocIPReply) (*attachment, *current.Result, error) {
	args := inv.args
	nc, err := pickNetConf(reply.NetConfs, args.IfName)
	if err != nil {
		return nil, nil, err
	}
	kind, fallback, err := SelectKind(reply.IPType, nc.ENIInfo, inv.conf.VirtualType, func() error { return inv.p.probeIPVlan(args.Netns) })
	if err != nil {
		return nil, nil, err
	}
	if fallback != nil {
		inv.log.Warn("datapath fallback", "requested", fallback.Requested, "using", kind, "reason", fallback.Reason)
		inv.recordEvent(ctx, client, rpc.EventType_EventTypeWarning, eventVirtualMode, fallback.Message())
	}
	spec, err := BuildSpec(SpecInput{Config: inv.conf, Kind: kind, NetConf: nc, Pod: inv.pod,
		HostNetNS: inv.p.hostNetNS, PodNetNS: args.Netns, IfName: args.IfName})
	if err != nil {
		return nil, nil, err
	}
	if err := inv.replaceStale(ctx, spec); err != nil {
		return nil, nil, err
	}
	att := &attachment{ContainerID: args.ContainerID, IfName: args.IfName, Pod: inv.pod,
		IPType: reply.IPType.String(), CreatedAt: time.Now().UTC(), Spec: spec}
	// Persisted before Setup: whatever Setup leaves behind, DEL and GC
	// find the state to undo it.
	if err := inv.state.save(att); err != nil {
		return nil, nil, types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	var result *current.Result
	inv.phases.datapathLockWait, err = withDatapathLockTimed(ctx, inv.state.dir, spec, false, func() error {
		t0 := time.Now()
		defer func() { inv.phases.datapath = time.Since(t0) }()
		var err error
		result, err = datapath.Setup(spec)
		return err
	})
	if err != nil {
		return att, nil, fmt.Errorf("set up %s datapath for pod %s: %w", kind, inv.pod, err)
	}
	// Setup recorded the host veth's index (and ExclusiveENI the ENI's
	// node name), which a later DEL or GC needs.
	if spec.ENIName != "" || spec.HostVethIndex != 0 {
		if err := inv.state.save(att); err != nil {
			return att, nil, types.NewError(types.ErrIOFailure, err.Error(), "")
		}
	}
	if result == nil {
		return att, nil, fmt.Errorf("set up %s datapath for pod %s: no result", kind, inv.pod)
	}
	return att, result, nil
}

// replaceStale tears down what an earlier ADD of this container built
// when the daemon now answers differently (another address or datapath):
// overwriting its state file would strand its rules.
func (inv *invocation) replaceStale(ctx context.Context, spec *datapath.Spec) error {
	old, err := inv.state.load(inv.args.ContainerID, inv.args.IfName)
	if err != nil {
		return nil // none (or unreadable: nothing to undo from it)
	}
	o := old.Spec
	if o.Kind == spec.Kind && o.IPv4 == spec.IPv4 && o.IPv6 == spec.IPv6 && o.ENIMAC == spec.ENIMAC && o.HostVeth == spec.HostVeth {
		spec.ENIName = o.ENIName // a retry: Setup finds its own work
		return nil
	}
	inv.log.Warn("the daemon answers differently than for this container's earlier ADD; removing the old setup",
		"oldKind", o.Kind, "oldIPv4", o.IPv4, "oldIPv6", o.IPv6)
	if err := inv.teardown(ctx, o); err != nil {
		return fmt.Errorf("remove the earlier setup of this container: %w", err)
	}
	return nil
}

// rollback undoes a failed ADD: the datapath, the daemon's allocation,
// the state file. The state file stays when the teardown failed, so the
// DEL that follows every failed ADD can try again.
func (inv *invocation) rollback(client *daemonClient, ipType rpc.IPType, att *attachment, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
	defer cancel()
	inv.log.Warn("ADD failed, rolling back", "err", cause)
	torn := true
	if att != nil {
		if err := inv.teardown(ctx, att.Spec); err != nil {
			torn = false
			inv.log.Error("rollback: datapath teardown failed; the DEL that follows retries", "err", err)
		}
	}
	req := &rpc.ReleaseIPRequest{K8SPodName: inv.pod.Name, K8SPodNamespace: inv.pod.Namespace,
		K8SPodInfraContainerId: inv.pod.InfraContainerID, IPType: ipType, Reason: releaseReasonRollback + cause.Error()}
	if att != nil {
		fillRelease(req, att.Spec)
	}
	if _, err := client.ReleaseIP(ctx, req); err != nil {
		inv.log.Error("rollback: ReleaseIP failed; the daemon's GC reclaims the address", "err", err)
	}
	if att != nil && torn {
		if err := inv.state.remove(att.ContainerID, att.IfName); err != nil {
			inv.log.Error("rollback", "err", err)
		}
	}
}

// fillRelease names the address and ENI being released.
func fillRelease(req *rpc.ReleaseIPRequest, s *datapath.Spec) {
	set := &rpc.IPSet{}
	if s.IPv4.IsValid() {
		set.IPv4 = s.IPv4.String()
	}
	if s.IPv6.IsValid() {
		set.IPv6 = s.IPv6.String()
	}
	req.IPv4Addr = set
	req.MacAddr = s.ENIMAC
}

// recordEvent raises a pod event through the daemon, best effort.
func (inv *invocation) recordEvent(parent context.Context, client *daemonClient, typ rpc.EventType, reason, msg string) {
	// Within the invocation's deadline: an event must not stretch the
	// timeout chain.
	ctx, cancel := context.WithTimeout(parent, eventTimeout)
	defer cancel()
	_, err := client.RecordEvent(ctx, &rpc.EventRequest{EventTarget: rpc.EventTarget_EventTargetPod,
		K8SPodName: inv.pod.Name, K8SPodNamespace: inv.pod.Namespace, EventType: typ, Reason: reason, Message: msg})
	if err != nil {
		inv.log.Warn("RecordEvent failed", "reason", reason, "err", err)
	}
}

// printResult prints the result in the config's cniVersion.
func (inv *invocation) printResult(r *current.Result) error {
	r.CNIVersion = current.ImplementedSpecVersion
	if !inv.conf.Net.DNS.IsEmpty() && r.DNS.IsEmpty() {
		r.DNS = inv.conf.Net.DNS
	}
	out, err := r.GetAsVersion(inv.conf.Net.CNIVersion)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("convert result to %s: %v", inv.conf.Net.CNIVersion, err), "")
	}
	if err := out.PrintTo(inv.p.stdout); err != nil {
		return types.NewError(types.ErrIOFailure, fmt.Sprintf("print result: %v", err), "")
	}
	return nil
}
