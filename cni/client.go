package cni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/rpc"
)

// The timeout chain. A runtime gives a CNI call at most 60 s (CRI-O) or
// 2 min (kubelet's runtimeRequestTimeout around containerd). The plugin's
// own work is bounded by Timeout, and a rollback after a failure by
// rollbackTimeout, so an ADD answers within 55 s. The daemon caps every
// RPC at 118 s and finishes an allocation the plugin gave up on; a
// retried ADD then gets the same answer at once.
const (
	// Timeout bounds an invocation's main work (locks, daemon calls,
	// datapath).
	Timeout = 45 * time.Second
	// ConnectTimeout bounds connecting to the daemon's socket, the gRPC
	// handshake included.
	ConnectTimeout = 5 * time.Second
	// rollbackTimeout bounds the undo after a failed ADD.
	rollbackTimeout = 10 * time.Second
	// eventTimeout bounds RecordEvent, which is best effort (Terway's).
	eventTimeout = 10 * time.Second
	// statusTimeout bounds STATUS: kubelet asks every 5 s.
	statusTimeout = 4 * time.Second
)

// unreachableError means the daemon's socket could not be connected.
type unreachableError struct {
	socket string
	err    error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("terway daemon unreachable at unix socket %s: %v (is terwayd running?)", e.socket, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// daemonClient is one invocation's connection to terwayd.
type daemonClient struct {
	rpc.TerwayBackendClient
	socket string
	conn   *grpc.ClientConn
	first  net.Conn
	used   *atomic.Bool
}

// dialDaemon connects to the daemon's socket within ConnectTimeout: the
// socket's connect and gRPC's HTTP/2 handshake (the daemon's settings
// frame), so a socket that accepts but never speaks (a hung daemon,
// something else bound to the path) costs ConnectTimeout, not gRPC's
// 20 s minimum connect timeout. The first connection is made here, so an
// absent daemon is reported at once and by name instead of as a gRPC
// deadline later.
func dialDaemon(ctx context.Context, socket string) (*daemonClient, error) {
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	d := net.Dialer{Timeout: ConnectTimeout}
	first, err := d.DialContext(cctx, "unix", socket)
	if err != nil {
		return nil, &unreachableError{socket: socket, err: err}
	}
	used := &atomic.Bool{}
	dial := func(ctx context.Context, _ string) (net.Conn, error) {
		if used.CompareAndSwap(false, true) {
			return first, nil
		}
		return d.DialContext(ctx, "unix", socket)
	}
	conn, err := grpc.NewClient("passthrough:///"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial),
		grpc.WithAuthority("localhost"),
		// Reconnects within the invocation are bounded alike.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: ConnectTimeout}))
	if err != nil {
		_ = first.Close()
		return nil, &unreachableError{socket: socket, err: err}
	}
	c := &daemonClient{TerwayBackendClient: rpc.NewTerwayBackendClient(conn), socket: socket, conn: conn, first: first, used: used}
	if err := waitReady(cctx, conn); err != nil {
		c.Close()
		return nil, &unreachableError{socket: socket, err: fmt.Errorf("%w, after %v", err, time.Since(start).Round(time.Millisecond))}
	}
	return c, nil
}

// waitReady starts connecting and waits until the connection is ready
// (the HTTP/2 handshake done) or ctx ends. A failed attempt is not
// retried: the socket accepted, so the daemon there broke the connection.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	conn.Connect()
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure:
			return errors.New("the connection failed during the gRPC handshake")
		case connectivity.Shutdown:
			return errors.New("the connection was shut down")
		}
		if !conn.WaitForStateChange(ctx, s) {
			return fmt.Errorf("the socket accepts connections but no gRPC handshake came (still %s): %w", s, ctx.Err())
		}
	}
}

// Close ends the connection.
func (c *daemonClient) Close() {
	_ = c.conn.Close()
	if c.used.CompareAndSwap(false, true) {
		_ = c.first.Close()
	}
}

// daemonDown reports whether err means the daemon cannot be asked now:
// not connectable, gone mid-call, or not answering in time.
func daemonDown(err error) bool {
	var u *unreachableError
	if errors.As(err, &u) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}

// isProcessing reports the daemon's busy answer (a call for the pod is
// in flight): by its rpc.PodBusy detail first; from a daemon that sends
// none (Terway's, ours before the detail) by rpc.PodBusyText in the
// message, as before.
func isProcessing(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := rpc.PodBusyDetail(err); ok {
		return true
	}
	return strings.Contains(status.Convert(err).Message(), rpc.PodBusyText)
}

// rpcError turns a failed daemon call into a CNI error: code 11 (try
// again later) where retrying can help, 999 otherwise.
func rpcError(op string, pod PodID, err error) *types.Error {
	var u *unreachableError
	if errors.As(err, &u) {
		return types.NewError(types.ErrTryAgainLater, u.Error(), "")
	}
	st := status.Convert(err)
	msg := st.Message()
	busy := func() *types.Error {
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("%s for pod %s: the daemon is still working on an earlier call for this pod: %s", op, pod, msg), "")
	}
	// The detail says so whatever the code and text; without it, only the
	// text of an Unavailable answer does (a daemon before the detail, or
	// Terway's).
	if _, ok := rpc.PodBusyDetail(err); ok {
		return busy()
	}
	switch st.Code() {
	case codes.ResourceExhausted:
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("%s for pod %s: no address available on this node now, retry later: %s", op, pod, msg), "")
	case codes.Unavailable:
		if strings.Contains(msg, rpc.PodBusyText) {
			return busy()
		}
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("%s for pod %s: daemon unavailable: %s", op, pod, msg), "")
	case codes.DeadlineExceeded, codes.Canceled:
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("%s for pod %s: no answer from the daemon in time (it keeps working; retry): %s", op, pod, msg), "")
	case codes.NotFound, codes.Aborted:
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("%s for pod %s: %s", op, pod, msg), "")
	}
	return types.NewError(types.ErrInternal, fmt.Sprintf("%s for pod %s: daemon error (%s): %s", op, pod, st.Code(), msg), "")
}
