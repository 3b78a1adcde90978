package cni

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/rpc"
)

// gcLockWait is how long GC waits for a container's lock: a held lock
// means an ADD or DEL is at work on it, so it is not garbage.
const gcLockWait = time.Second

// cmdGC (spec 1.1.0) removes every attachment the runtime no longer lists
// as valid: the host side from its state file, then the daemon releases
// the addresses (GarbageCollect, with its sticky policy). It continues
// past errors and reports them together; with the daemon unreachable the
// host is still cleaned and the answer is code 11.
func (p *plugin) cmdGC(ctx context.Context, inv *invocation) error {
	valid := map[[2]string]bool{}
	var validList []*rpc.Attachment
	for _, a := range inv.conf.Net.ValidAttachments {
		valid[[2]string{a.ContainerID, a.IfName}] = true
		validList = append(validList, &rpc.Attachment{ContainerID: a.ContainerID, IfName: a.IfName})
	}
	var errs []*types.Error
	atts, listErrs := inv.state.list()
	for _, err := range listErrs {
		errs = append(errs, types.NewError(types.ErrIOFailure, err.Error(), ""))
	}
	removed := 0
	for _, att := range atts {
		if valid[[2]string{att.ContainerID, att.IfName}] {
			continue
		}
		if err := inv.collect(ctx, att); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	inv.state.removeStaleTemps(time.Hour)
	// Host veths retired by DELs whose reaper never ran (killed, or a
	// runtime that keeps namespaces around) go now.
	if n, err := datapath.Reap(p.hostNetNS); err != nil {
		errs = append(errs, types.NewError(types.ErrInternal, fmt.Sprintf("GC: reap retired host veths: %v", err), ""))
	} else if n > 0 {
		inv.log.Info("GC: retired host veths reaped", "count", n)
	}
	inv.log.Info("host state collected", "valid", len(validList), "removed", removed, "errors", len(errs))

	if err := inv.daemonGC(ctx, validList); err != nil {
		errs = append(errs, err)
	}
	return joinErrors(errs)
}

// collect removes one stale attachment from the host.
func (inv *invocation) collect(ctx context.Context, att *attachment) *types.Error {
	lctx, cancel := context.WithTimeout(ctx, gcLockWait)
	defer cancel()
	lock, err := lockContainer(lctx, inv.state.dir, att.ContainerID)
	if err != nil {
		inv.log.Info("attachment busy, left to its ADD/DEL", "containerID", att.ContainerID, "err", err)
		return nil
	}
	defer lock.unlockAndRemove()
	// Still there once locked? A DEL may have finished meanwhile.
	if _, err := inv.state.load(att.ContainerID, att.IfName); errors.Is(err, errNoState) {
		return nil
	}
	if err := inv.teardown(ctx, att.Spec); err != nil {
		inv.log.Error("GC: teardown failed", "containerID", att.ContainerID, "ifname", att.IfName, "err", err)
		return types.NewError(types.ErrInternal,
			fmt.Sprintf("GC container %s interface %s (pod %s): %v", att.ContainerID, att.IfName, att.Pod, err), "")
	}
	if err := inv.state.remove(att.ContainerID, att.IfName); err != nil {
		return types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	inv.log.Info("GC: stale attachment removed", "containerID", att.ContainerID, "ifname", att.IfName, "pod", att.Pod.String())
	return nil
}

// daemonGC asks the daemon to release what the valid list leaves out.
func (inv *invocation) daemonGC(ctx context.Context, valid []*rpc.Attachment) *types.Error {
	client, err := dialDaemon(ctx, inv.conf.SocketPath)
	if err != nil {
		inv.log.Warn("GC: daemon unreachable", "err", err)
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("GC: host state cleaned, but %v", err), "")
	}
	defer client.Close()
	reply, err := client.GarbageCollect(ctx, &rpc.GCRequest{ValidAttachments: valid})
	switch {
	case status.Code(err) == codes.Unimplemented:
		inv.log.Warn("GC: the daemon has no GarbageCollect (older version); its own GC reclaims addresses")
		return nil
	case err != nil:
		code := types.ErrInternal
		if daemonDown(err) {
			code = types.ErrTryAgainLater
		}
		return types.NewError(code, fmt.Sprintf("GC: daemon GarbageCollect: %s", status.Convert(err).Message()), "")
	}
	inv.log.Info("GC: daemon released", "pods", reply.GetReleased())
	return nil
}

// joinErrors answers the first error's code with every message.
func joinErrors(errs []*types.Error) error {
	if len(errs) == 0 {
		return nil
	}
	if len(errs) == 1 {
		return errs[0]
	}
	msg := errs[0].Msg
	for _, e := range errs[1:] {
		msg += "; " + e.Msg
	}
	return types.NewError(errs[0].Code, msg, "")
}
