package cni

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// silentSocket listens on a unix socket in a short temp dir, accepts
// every connection, reads what comes and never writes: a hung daemon, or
// something else bound to the daemon's path. Closed at test end.
func silentSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "twsilent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "eni.socket")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen %s: %v", path, err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return path
}

// connectBound is how long a verb may take against a silent socket:
// ConnectTimeout and a generous margin for a loaded 2-core machine (the
// bug this guards against took grpc's 20 s minimum connect timeout).
const connectBound = 8 * time.Second

// TestSilentSocketConnectTimeout: a socket that accepts but never speaks
// bounds connecting by ConnectTimeout (5 s). ADD fails with code 11
// naming the socket, before anything is set up; DEL still succeeds (the
// daemon's GC reclaims the address) and cleans the node; STATUS answers
// 50 within its own 4 s.
func TestSilentSocketConnectTimeout(t *testing.T) {
	t.Parallel()
	t.Run("ADD", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		socket := silentSocket(t)
		p := e.newPod("silent-add")
		before := e.node.state(t)
		start := time.Now()
		_, err := e.run("ADD", p.args(e.confSocket("1.1.0", socket)))
		took := time.Since(start)
		if err == nil {
			t.Fatal("ADD against a silent socket succeeded")
		}
		if took >= connectBound {
			t.Errorf("ADD took %v against a silent socket, want about ConnectTimeout (%v), under %v", took, ConnectTimeout, connectBound)
		}
		if c := cniCode(t, err); c != types.ErrTryAgainLater || !strings.Contains(err.Error(), socket) ||
			!strings.Contains(err.Error(), "unreachable") {
			t.Errorf("ADD against a silent socket: code %d %q, want %d naming %s as unreachable", c, err, types.ErrTryAgainLater, socket)
		}
		if _, err := os.Stat(filepath.Join(e.stateDir, p.cid+"-eth0.json")); !os.IsNotExist(err) {
			t.Errorf("state file after a failed connect: %v", err)
		}
		if extra := diff(e.node.state(t), before); len(extra) > 0 {
			t.Errorf("node changed by a failed ADD:\n%s", strings.Join(extra, "\n"))
		}
	})
	t.Run("DEL", func(t *testing.T) {
		t.Parallel()
		e, p := newMultiIPPod(t, "192.168.1.90", "silent-del")
		before := e.node.state(t)
		conf := e.conf("1.1.0", "")
		_, out := e.add(p, conf)
		att := e.wantState(p, kindCases[0].kind)
		socket := silentSocket(t)
		start := time.Now()
		args := p.args(withPrev(e.confSocket("1.1.0", socket), out))
		_, err := e.run("DEL", args)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("DEL with a silent daemon socket: %v", err)
		}
		if took >= connectBound {
			t.Errorf("DEL took %v against a silent socket, want about ConnectTimeout (%v), under %v", took, ConnectTimeout, connectBound)
		}
		if linkExists(t, e.node.nl, att.Spec.HostVeth) {
			t.Errorf("host veth %s left", att.Spec.HostVeth)
		}
		e.wantNodeRestored(before, kindCases[0].withIP("192.168.1.90"))
	})
	t.Run("STATUS", func(t *testing.T) {
		t.Parallel()
		socket := silentSocket(t)
		conf := []byte(`{"cniVersion":"1.1.0","name":"terway","type":"terway","socket_path":"` + socket +
			`","state_dir":"` + filepath.Join(t.TempDir(), "state") + `"}`)
		p := newPlugin(io.Discard, tlog{t})
		start := time.Now()
		err := p.funcs().Status(&skel.CmdArgs{StdinData: conf})
		took := time.Since(start)
		if err == nil || cniCode(t, err) != types.ErrPluginNotAvailable {
			t.Errorf("STATUS against a silent socket: %v, want code 50", err)
		}
		if took >= statusTimeout+time.Second {
			t.Errorf("STATUS took %v, want at most about %v", took, statusTimeout)
		}
	})
}

// confSocket is e.conf with another socket_path.
func (e *env) confSocket(v, socket string) []byte {
	return []byte(strings.Replace(string(e.conf(v, "")), `"socket_path":"`+e.daemon.socket+`"`, `"socket_path":"`+socket+`"`, 1))
}
