package fabric

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/terway-sim/terway/fakecloud"
)

// servers are the HTTP listeners inside the fabric namespace.
type servers struct {
	list []*http.Server
}

func (s *servers) close() error {
	var errs []error
	for _, srv := range s.list {
		errs = append(errs, srv.Close())
	}
	return errors.Join(errs...)
}

// Serve starts the cloud endpoints inside the fabric: metadata at
// MetadataEndpoint() and the ECS/VPC API at APIEndpoint(), both on port 80.
// Nodes reach them over their primary ENI with their primary IP as source
// (no NAT), so fakecloud's MetadataBySourceHandler tells the instance by
// it. Call it once, after fakecloud.New(Options{Hypervisor: f}); Close
// stops them.
func (f *Fabric) Serve(metadata, api http.Handler) error {
	if metadata == nil || api == nil {
		return errors.New("serve: both the metadata and the API handler are required")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	if f.servers != nil {
		return errors.New("serve: already serving")
	}
	ls, err := f.listen(f.metaAddr, f.apiAddr)
	if err != nil {
		return err
	}
	s := &servers{}
	for i, h := range []http.Handler{metadata, api} {
		srv := fakecloud.NewHTTPServer(h, fakecloud.ServerTimeouts{ReadHeader: 30 * time.Second}, nil)
		s.list = append(s.list, srv)
		f.wg.Add(1)
		go func(l net.Listener) {
			defer f.wg.Done()
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				f.log.Warn("fabric listener stopped", "addr", l.Addr(), "err", err)
			}
		}(ls[i])
	}
	f.servers = s
	f.log.Info("cloud endpoints serving in the fabric", "metadata", f.MetadataEndpoint(), "api", f.APIEndpoint())
	return nil
}

// listen opens TCP port 80 on each address inside the fabric namespace; a
// socket stays in the namespace it was created in.
func (f *Fabric) listen(addrs ...netip.Addr) ([]net.Listener, error) {
	h, err := ns.GetNS(f.path)
	if err != nil {
		return nil, fmt.Errorf("open fabric netns: %w", err)
	}
	defer func() { _ = h.Close() }()
	var ls []net.Listener
	err = h.Do(func(ns.NetNS) error {
		for _, a := range addrs {
			l, err := net.Listen("tcp", netip.AddrPortFrom(a, 80).String())
			if err != nil {
				return fmt.Errorf("listen on %s:80 in the fabric: %w", a, err)
			}
			ls = append(ls, l)
		}
		return nil
	})
	if err != nil {
		for _, l := range ls {
			_ = l.Close()
		}
		return nil, err
	}
	return ls, nil
}
