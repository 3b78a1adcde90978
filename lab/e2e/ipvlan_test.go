package e2e

import (
	"encoding/binary"

	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/daemon/mode"
)

// TestIPVlanServiceThroughNode: an IPVlan pod's Service traffic goes to
// the node, where a DNAT rule standing in for kube-proxy sends it to a
// backend that listens on the node's own address. The Service address is
// routed nowhere else (the VPC has no route for it), so an answer at all
// means the ENI's redirect brought the packet into the node; the backend
// must see the pod's address as source, the pod the Service address, and
// the DNAT rule must have counted the connection.
func TestIPVlanServiceThroughNode(t *testing.T) {
	c := datapathCase{"IPVlan", mode.ENIMultiIP, "IPVlan"}
	e, n1, n2 := twoNodes(t, c)
	a := n1.newPod("svc-a", nil)
	a.mustAdd("1.1.0")
	r := n2.newPod("svc-r", nil)
	r.mustAdd("1.1.0")
	verifyKernel(t, c, a, "1.1.0")

	fn, ok := e.fabric.Node(n1.id)
	if !ok {
		t.Fatalf("no fabric node %s", n1.id)
	}
	backend := n1.serveInNode(t, netip.AddrPortFrom(fn.PrimaryIP(), 8080))
	vip := netip.AddrPortFrom(netip.MustParseAddr("10.96.0.10"), 80)
	counter := n1.dnat(t, vip, backend.addr)

	if err := a.dial(vip, netip.Addr{}); err != nil {
		t.Fatalf("pod %s -> Service %s: %v\n%s", a.name, vip, err, e.dump(n1))
	}
	if got := backend.peers(); len(got) == 0 || got[0] != a.ip {
		t.Errorf("the backend saw connections from %v, want the pod's %s", got, a.ip)
	}
	if n := counter(); n == 0 {
		t.Error("the DNAT rule counted no packet: the connection reached the backend some other way")
	}
	// A pod on another node is no Service backend here: its own node
	// has no DNAT rule, so the same Service address answers nothing.
	if err := r.dial(vip, netip.Addr{}); err == nil {
		t.Errorf("pod %s on %s reached Service %s without a DNAT rule on its node", r.name, n2.name, vip)
	}
	for _, p := range []*pod{a, r} {
		p.mustDel("1.1.0")
	}
	assertClean(t, n1, a.ip)
	assertClean(t, n2, r.ip)
}

// nodeServer is a TCP echo server in a node's namespace that records its
// peers.
type nodeServer struct {
	addr netip.AddrPort
	mu   sync.Mutex
	seen []netip.Addr
}

func (s *nodeServer) peers() []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]netip.Addr(nil), s.seen...)
}

// serveInNode listens on addr inside the node's namespace.
func (n *node) serveInNode(t *testing.T, addr netip.AddrPort) *nodeServer {
	t.Helper()
	nn, err := ns.GetNS(n.ln.NetNSPath())
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Close()
	var ln net.Listener
	err = nn.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", addr.String())
		return err
	})
	if err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, n.name, err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &nodeServer{addr: addr}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.seen = append(s.seen, netip.MustParseAddrPort(c.RemoteAddr().String()).Addr().Unmap())
			s.mu.Unlock()
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.CopyN(c, c, 4)
			}()
		}
	}()
	return s
}

// dnat adds, in the node's namespace, what kube-proxy would for a Service
// with one backend: a nat prerouting rule rewriting TCP to vip into
// backend, with a counter. It returns how to read the counter; the table
// goes when the test ends.
func (n *node) dnat(t *testing.T, vip, backend netip.AddrPort) (packets func() uint64) {
	t.Helper()
	nn, err := ns.GetNS(n.ln.NetNSPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nn.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(nn.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	table := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "e2esvc"})
	chain := c.AddChain(&nftables.Chain{Name: "pre", Table: table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	port := func(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }
	c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: vip.Addr().AsSlice()},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port(vip.Port())},
		&expr.Counter{},
		&expr.Immediate{Register: 1, Data: backend.Addr().AsSlice()},
		&expr.Immediate{Register: 2, Data: port(backend.Port())},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2},
	}})
	if err := c.Flush(); err != nil {
		t.Fatalf("DNAT %s -> %s in %s: %v", vip, backend, n.name, err)
	}
	t.Cleanup(func() {
		c.DelTable(table)
		_ = c.Flush()
	})
	return func() uint64 {
		rules, err := c.GetRules(table, chain)
		if err != nil {
			t.Fatalf("read the DNAT rule: %v", err)
		}
		var sum uint64
		for _, r := range rules {
			for _, x := range r.Exprs {
				if ctr, ok := x.(*expr.Counter); ok {
					sum += ctr.Packets
				}
			}
		}
		return sum
	}
}
