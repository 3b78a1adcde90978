package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
)

// relay forwards TCP connections accepted on one listener to a dialled
// address. The lab uses it across network namespaces: a socket keeps the
// namespace it was created in, so a listener opened inside a node accepts
// there while the relay dials from the host, and the other way round. All
// the traffic stays on loopback or inside the lab's namespaces.
type relay struct {
	l    net.Listener
	dial func(ctx context.Context) (net.Conn, error)
	log  *slog.Logger
	wg   sync.WaitGroup
}

func startRelay(l net.Listener, dial func(ctx context.Context) (net.Conn, error), log *slog.Logger) *relay {
	r := &relay{l: l, dial: dial, log: log}
	r.wg.Add(1)
	go r.serve()
	return r
}

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.log.Warn("relay accept", "listen", r.l.Addr().String(), "err", err)
			}
			return
		}
		go r.pipe(c)
	}
}

func (r *relay) pipe(in net.Conn) {
	defer in.Close()
	out, err := r.dial(context.Background())
	if err != nil {
		r.log.Debug("relay dial", "listen", r.l.Addr().String(), "err", err)
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	<-done
}

func (r *relay) close() {
	_ = r.l.Close()
	r.wg.Wait()
}
