package deviceplugin

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"

	"google.golang.org/grpc"
	"k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// server is one gRPC server on one plugin socket; a kubelet restart replaces
// it with a new one on a new socket.
type server struct {
	path string
	info fs.FileInfo // the socket as created, to tell it from a successor
	grpc *grpc.Server
	done chan struct{} // closed when Serve has returned
}

// startServer listens on path with mode 0600 (only kubelet, as root, may
// talk to the plugin) and serves the DevicePlugin service.
func (p *Plugin) startServer(path string) (*server, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove stale plugin socket: %w", err)
	}
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on plugin socket: %w", err)
	}
	// We remove the socket ourselves, and only if it is still ours.
	lis.SetUnlinkOnClose(false)
	info, err := secureSocket(path)
	if err != nil {
		_ = lis.Close()
		_ = os.Remove(path)
		return nil, err
	}
	// Waiting for handlers lets Run promise that no ListAndWatch outlives it.
	gs := grpc.NewServer(grpc.WaitForHandlers(true))
	s := &server{path: path, info: info, grpc: gs, done: make(chan struct{})}
	v1beta1.RegisterDevicePluginServer(s.grpc, service{p: p})
	go s.serve(p, lis)
	p.log.Info("serving device plugin", "socket", path)
	return s, nil
}

func secureSocket(path string) (fs.FileInfo, error) {
	if err := os.Chmod(path, socketMode); err != nil {
		return nil, fmt.Errorf("chmod plugin socket: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("stat plugin socket: %w", err)
	}
	return info, nil
}

func (s *server) serve(p *Plugin, lis net.Listener) {
	defer close(s.done)
	if err := s.grpc.Serve(lis); err != nil {
		p.log.Warn("device plugin server failed", "socket", s.path, "err", err)
	}
}

// stop ends every RPC (ListAndWatch streams included), waits for Serve to
// return and removes the socket unless someone replaced it.
func (s *server) stop(p *Plugin) {
	s.grpc.Stop()
	<-s.done
	if !sameFile(statOrNil(s.path), s.info) {
		return
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.log.Warn("remove plugin socket", "socket", s.path, "err", err)
	}
}
