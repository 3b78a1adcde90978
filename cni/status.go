package cni

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/rpc"
)

// cmdStatus (spec 1.1.0) answers whether ADDs can succeed: code 50 when
// the daemon is unreachable or says it is not ready. Address exhaustion
// counts only through the daemon's Ready (the operator's opt-in), so a
// dry vSwitch does not take every node on it out of service.
func (p *plugin) cmdStatus(ctx context.Context, inv *invocation) error {
	client, err := dialDaemon(ctx, inv.conf.SocketPath)
	if err != nil {
		inv.log.Warn("STATUS: daemon unreachable", "err", err)
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	defer client.Close()
	reply, err := client.Status(ctx, &rpc.StatusRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		// An older daemon without Status: it answered, so it serves.
		inv.log.Debug("STATUS: daemon has no Status RPC, taken as ready")
		return nil
	case err != nil:
		return types.NewError(types.ErrPluginNotAvailable,
			fmt.Sprintf("terway daemon at %s: Status: %s", inv.conf.SocketPath, status.Convert(err).Message()), "")
	case !reply.GetReady():
		return types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("terway daemon not ready: %s", reply.GetReason()), "")
	}
	inv.log.Debug("STATUS: ready", "capacity", reply.GetCapacity(), "inUse", reply.GetInUse(), "idle", reply.GetIdle(),
		"exhausted", reply.GetExhausted())
	return nil
}
