package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const (
	kubeletSocketName = "kubelet.sock"
	socketNameFormat  = "%d-eni.sock"
	socketMode        = 0o600
	registerTimeout   = 10 * time.Second
	// maxSocketPath is the room in sockaddr_un.sun_path, less the NUL.
	maxSocketPath = 107
)

// runState is what Run knows about kubelet and its own server between polls.
type runState struct {
	srv        *server     // nil when not serving
	registered bool        // kubelet accepted the current server
	kubelet    fs.FileInfo // kubelet.sock when registration succeeded
	seen       fs.FileInfo // kubelet.sock at the previous poll
	retryAt    time.Time   // no attempt before this
	delay      time.Duration
	lastSeq    int64 // number in the last socket name
}

// Run serves the plugin and keeps it registered with kubelet until ctx ends.
// Kubelet forgets plugins when it restarts (it recreates kubelet.sock and
// deletes plugin sockets), so every poll checks both sockets and, when
// either changed, serves on a new socket and registers again. Failures are
// logged and retried with backoff: a kubelet that is down must not take the
// daemon with it. Run returns nil once ctx ends, with its socket removed and
// its goroutines gone; it returns an error only for unusable options or
// when the plugin is already running.
func (p *Plugin) Run(ctx context.Context) error {
	if longest := filepath.Join(p.dir, fmt.Sprintf(socketNameFormat, int64(math.MaxInt64))); len(longest) > maxSocketPath {
		return fmt.Errorf("device plugin dir %q: too long for a unix socket path", p.dir)
	}
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("device plugin: Run called while already running")
	}
	defer p.running.Store(false)

	ticker := p.clock.NewTicker(p.poll)
	defer ticker.Stop()
	st := &runState{}
	defer p.stopServer(st, "shutting down")
	p.log.Info("device plugin starting", "dir", p.dir)
	for {
		p.reconcile(ctx, st)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// reconcile is one poll: drop a server kubelet no longer knows, then serve
// and register when needed and the backoff allows.
func (p *Plugin) reconcile(ctx context.Context, st *runState) {
	kubelet := statOrNil(p.kubeletSocket())
	if reason := p.staleReason(st, kubelet); reason != "" {
		p.stopServer(st, reason)
	}
	if !sameFile(kubelet, st.seen) {
		// A new kubelet is up: try at once instead of waiting out a backoff
		// earned against the old one.
		st.retryAt, st.delay = time.Time{}, 0
	}
	st.seen = kubelet
	if st.registered || kubelet == nil || p.clock.Now().Before(st.retryAt) {
		return
	}
	if err := p.serveAndRegister(ctx, st); err != nil {
		if ctx.Err() == nil {
			p.backOff(st, err)
		}
		return
	}
	st.registered, st.kubelet, st.delay = true, kubelet, 0
	p.log.Info("registered with kubelet", "endpoint", filepath.Base(st.srv.path))
}

// staleReason says why the current server must be replaced, or "".
func (p *Plugin) staleReason(st *runState, kubelet fs.FileInfo) string {
	switch {
	case st.srv == nil:
		return ""
	case !sameFile(statOrNil(st.srv.path), st.srv.info):
		return "plugin socket removed"
	case st.registered && kubelet == nil:
		return "kubelet socket removed"
	case st.registered && !sameFile(kubelet, st.kubelet):
		return "kubelet socket recreated"
	}
	return ""
}

func (p *Plugin) serveAndRegister(ctx context.Context, st *runState) error {
	if st.srv == nil {
		srv, err := p.startServer(p.nextSocketPath(st))
		if err != nil {
			return err
		}
		st.srv = srv
	}
	return p.register(ctx, filepath.Base(st.srv.path))
}

func (p *Plugin) backOff(st *runState, err error) {
	if st.delay == 0 {
		st.delay = p.poll
	} else {
		st.delay = min(2*st.delay, p.maxRetryDelay)
	}
	st.retryAt = p.clock.Now().Add(st.delay)
	p.log.Warn("device plugin registration failed, will retry", "err", err, "retryIn", st.delay)
}

func (p *Plugin) stopServer(st *runState, reason string) {
	if st.srv == nil {
		return
	}
	p.log.Info("stopping device plugin server", "reason", reason, "socket", st.srv.path)
	st.srv.stop(p)
	st.srv, st.registered, st.kubelet = nil, false, nil
}

// nextSocketPath names a socket after the current unix time, as Terway does,
// never reusing a number so kubelet always sees a fresh endpoint.
func (p *Plugin) nextSocketPath(st *runState) string {
	st.lastSeq = max(p.clock.Now().Unix(), st.lastSeq+1)
	return filepath.Join(p.dir, fmt.Sprintf(socketNameFormat, st.lastSeq))
}

func (p *Plugin) kubeletSocket() string {
	return filepath.Join(p.dir, kubeletSocketName)
}

// register tells kubelet where the plugin listens; kubelet then dials back
// and opens ListAndWatch.
func (p *Plugin) register(ctx context.Context, endpoint string) error {
	conn, err := grpc.NewClient("unix:"+p.kubeletSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial kubelet at %s: %w", p.kubeletSocket(), err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	_, err = v1beta1.NewRegistrationClient(conn).Register(ctx, &v1beta1.RegisterRequest{
		Version:      v1beta1.Version,
		Endpoint:     endpoint,
		ResourceName: p.resource,
		Options:      &v1beta1.DevicePluginOptions{},
	})
	if err != nil {
		return fmt.Errorf("register %s at %s with kubelet: %w", p.resource, endpoint, err)
	}
	return nil
}

// statOrNil returns the file's info, or nil when it cannot be seen.
func statOrNil(path string) fs.FileInfo {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	return fi
}

// sameFile tells whether two observations are of the same socket. The
// modification time guards against a recreated socket reusing the inode
// number of the removed one.
func sameFile(a, b fs.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime())
}
