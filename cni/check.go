package cni

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/rpc"
)

// cmdCheck verifies a pod interface: the state file exists, prevResult
// and the daemon's record name its addresses, and every kernel object of
// the datapath is in place. The error names the first broken object.
func (p *plugin) cmdCheck(ctx context.Context, inv *invocation) error {
	att, err := inv.state.load(inv.args.ContainerID, inv.args.IfName)
	if errors.Is(err, errNoState) {
		return types.NewError(types.ErrUnknownContainer,
			fmt.Sprintf("container unknown: no terway state for container %s interface %s", inv.args.ContainerID, inv.args.IfName), "")
	}
	if err != nil {
		return types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	spec := *att.Spec
	spec.PodNetNS = inv.args.Netns
	if err := checkPrevResult(inv.conf.Net.PrevResult, &spec); err != nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("CHECK pod %s: %v", att.Pod, err), "")
	}
	if err := inv.checkDaemon(ctx, att); err != nil {
		return err
	}
	err = withDatapathLock(ctx, inv.state.dir, &spec, false, func() error { return datapath.Check(&spec) })
	if err != nil {
		inv.log.Warn("check failed", "err", err)
		return types.NewError(types.ErrInternal, fmt.Sprintf("CHECK pod %s: %s datapath: %v", att.Pod, spec.Kind, err), "")
	}
	inv.log.Debug("check passed")
	return nil
}

// checkPrevResult compares the addresses of the runtime's cached result
// with the state's.
func checkPrevResult(prev types.Result, s *datapath.Spec) error {
	if prev == nil {
		return nil
	}
	res, err := current.NewResultFromResult(prev)
	if err != nil {
		return fmt.Errorf("prevResult: %w", err)
	}
	var got []netip.Addr
	for _, ip := range res.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
			got = append(got, a.Unmap())
		}
	}
	for _, want := range []netip.Addr{s.IPv4, s.IPv6} {
		if want.IsValid() && !slices.Contains(got, want) {
			return fmt.Errorf("prevResult addresses %v lack the pod's %s", got, want)
		}
	}
	for _, a := range got {
		if a != s.IPv4 && a != s.IPv6 {
			return fmt.Errorf("prevResult address %s is not the pod's (%s %s)", a, s.IPv4, s.IPv6)
		}
	}
	return nil
}

// checkDaemon asks the daemon whether it still gives the container the
// same address. A daemon that cannot be reached is skipped: CHECK is
// about the datapath, and the daemon's own checks cover its side.
func (inv *invocation) checkDaemon(ctx context.Context, att *attachment) error {
	if !att.Pod.Known() {
		return nil
	}
	client, err := dialDaemon(ctx, inv.conf.SocketPath)
	if err != nil {
		inv.log.Warn("daemon unreachable, address not compared", "err", err)
		return nil
	}
	defer client.Close()
	reply, err := client.GetIPInfo(ctx, &rpc.GetInfoRequest{K8SPodName: att.Pod.Name, K8SPodNamespace: att.Pod.Namespace,
		K8SPodInfraContainerId: att.Pod.InfraContainerID})
	if daemonDown(err) {
		inv.log.Warn("daemon did not answer, address not compared", "err", err)
		return nil
	}
	if err != nil {
		return rpcError("GetIPInfo", att.Pod, err)
	}
	if !reply.GetSuccess() {
		return types.NewError(types.ErrUnknownContainer,
			fmt.Sprintf("CHECK pod %s: the daemon holds no address for container %s (it may have been released)", att.Pod, att.ContainerID), "")
	}
	nc, err := pickNetConf(reply.NetConfs, att.IfName)
	if err != nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("CHECK pod %s: %v", att.Pod, err), "")
	}
	s := att.Spec
	for _, c := range []struct {
		got  string
		want netip.Addr
	}{{nc.GetBasicInfo().GetPodIP().GetIPv4(), s.IPv4}, {nc.GetBasicInfo().GetPodIP().GetIPv6(), s.IPv6}} {
		got, _ := netip.ParseAddr(c.got)
		if got != c.want {
			return types.NewError(types.ErrInternal,
				fmt.Sprintf("CHECK pod %s: the daemon gives the pod %s, the interface has %s", att.Pod, c.got, c.want), "")
		}
	}
	return nil
}
