package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/terway-sim/terway/internal/testnetns"
)

// pod is a Kubernetes pod object on a node and its network namespace.
type pod struct {
	n         *node
	namespace string
	name      string
	cid       string // sandbox container ID
	netns     ns.NetNS
	ip        netip.Addr
	ip6       netip.Addr
	result    *current.Result
}

// newPod creates the pod object and a fresh network namespace for it.
func (n *node) newPod(name string, mod func(*corev1.Pod)) *pod {
	t := n.e.t
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "e2e", Name: name, UID: k8stypes.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: n.name}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if mod != nil {
		mod(p)
	}
	if _, err := n.kube.CoreV1().Pods("e2e").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	netns, err := testnetns.New()
	if err != nil {
		t.Fatal(err)
	}
	pd := &pod{n: n, namespace: "e2e", name: name, cid: fmt.Sprintf("c-%s-%d", name, time.Now().UnixNano()), netns: netns}
	t.Cleanup(pd.closeNS)
	return pd
}

func (p *pod) closeNS() {
	if p.netns == nil {
		return
	}
	if err := testnetns.Remove(p.netns); err != nil {
		p.n.e.t.Errorf("remove pod netns: %v", err)
	}
	p.netns = nil
}

// deleteObject removes the pod object (the pod is gone from the API).
func (p *pod) deleteObject() {
	if err := p.n.kube.CoreV1().Pods(p.namespace).Delete(context.Background(), p.name, metav1.DeleteOptions{}); err != nil {
		p.n.e.t.Fatal(err)
	}
}

func (p *pod) rt(netns string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.cid, NetNS: netns, IfName: "eth0", Args: [][2]string{
		{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", p.namespace}, {"K8S_POD_NAME", p.name},
		{"K8S_POD_INFRA_CONTAINER_ID", p.cid}, {"K8S_POD_UID", "uid-" + p.name}}}
}

func (p *pod) nsPath() string {
	if p.netns == nil {
		return ""
	}
	return p.netns.Path()
}

// add runs CNI ADD with spec version v and records the pod's address.
func (p *pod) add(v string) error {
	cni, list := p.n.cni(v)
	res, err := cni.AddNetworkList(ctxT(p.n.e.t), list, p.rt(p.nsPath()))
	if err != nil {
		return err
	}
	if res.Version() != v {
		return fmt.Errorf("ADD result version %s, want %s", res.Version(), v)
	}
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return fmt.Errorf("convert result: %w", err)
	}
	if len(r.IPs) == 0 {
		return fmt.Errorf("ADD result without IPs: %+v", r)
	}
	p.result = r
	for _, c := range r.IPs {
		a, _ := netip.AddrFromSlice(c.Address.IP)
		if a.Unmap().Is4() {
			p.ip = a.Unmap()
		} else {
			p.ip6 = a
		}
	}
	return nil
}

func (p *pod) mustAdd(v string) {
	p.n.e.t.Helper()
	if err := p.add(v); err != nil {
		p.n.e.t.Fatalf("ADD %s/%s (%s): %v\nplugin log:\n%s", p.namespace, p.name, v, err, p.n.pluginLog())
	}
}

func (p *pod) check(v string) error {
	cni, list := p.n.cni(v)
	return cni.CheckNetworkList(ctxT(p.n.e.t), list, p.rt(p.nsPath()))
}

func (p *pod) del(v string, withNetns bool) error {
	cni, list := p.n.cni(v)
	netns := ""
	if withNetns {
		netns = p.nsPath()
	}
	return cni.DelNetworkList(ctxT(p.n.e.t), list, p.rt(netns))
}

func (p *pod) mustDel(v string) {
	p.n.e.t.Helper()
	if err := p.del(v, true); err != nil {
		p.n.e.t.Fatalf("DEL %s/%s (%s): %v\nplugin log:\n%s", p.namespace, p.name, v, err, p.n.pluginLog())
	}
}

func (n *node) pluginLog() string {
	b, _ := readFile(n.path("plugin.log"))
	return b
}

// cniCode extracts the CNI error code of a plugin failure (0 if none).
func cniCode(err error) uint {
	var te *types.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

// serve starts a TCP echo server on the pod's IPv4 address inside its
// netns.
func (p *pod) serve() netip.AddrPort { return p.serveOn(p.ip) }

// serveOn starts a TCP echo server on one of the pod's addresses.
func (p *pod) serveOn(addr netip.Addr) netip.AddrPort {
	t := p.n.e.t
	t.Helper()
	var ln net.Listener
	err := p.netns.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		return err
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", p.name, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.CopyN(c, c, 4)
			}()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// dial connects from inside the pod (from local, or the pod's address if
// local is invalid) and exchanges a message.
func (p *pod) dial(to netip.AddrPort, local netip.Addr) error {
	return p.netns.Do(func(ns.NetNS) error {
		d := net.Dialer{Timeout: 3 * time.Second}
		if local.IsValid() {
			d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
		}
		c, err := d.Dial("tcp", to.String())
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			return fmt.Errorf("echo from %s: %q %v", to, buf, err)
		}
		return nil
	})
}

// reaches says whether the pod gets an answer from addr: an echo, or a
// TCP reset (connection refused) from a host that listens on nothing.
func (p *pod) reaches(addr netip.Addr) error {
	err := p.dial(netip.AddrPortFrom(addr, 9), netip.Addr{})
	if err == nil || errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	return err
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

// sources counts what arrived by source address, for listeners that
// serve on goroutines of their own.
type sources struct {
	mu   sync.Mutex
	from map[netip.Addr]int
}

func (s *sources) add(a netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.from == nil {
		s.from = map[netip.Addr]int{}
	}
	s.from[a]++
}

func (s *sources) count(a netip.Addr) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.from[a]
}

// udpSink counts the datagrams a pod receives, by source address.
type udpSink struct {
	addr netip.AddrPort
	sources
}

// sink listens for UDP on the pod's address inside its netns.
func (p *pod) sink() *udpSink {
	t := p.n.e.t
	t.Helper()
	var c net.PacketConn
	err := p.netns.Do(func(ns.NetNS) error {
		var err error
		c, err = net.ListenPacket("udp", netip.AddrPortFrom(p.ip, 0).String())
		return err
	})
	if err != nil {
		t.Fatalf("listen UDP in %s: %v", p.name, err)
	}
	t.Cleanup(func() { c.Close() })
	s := &udpSink{addr: netip.MustParseAddrPort(c.LocalAddr().String())}
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			s.add(netip.MustParseAddrPort(from.String()).Addr().Unmap())
		}
	}()
	return s
}

// sendUDP sends a datagram from inside the pod with source local.
func (p *pod) sendUDP(to netip.AddrPort, local netip.Addr) error {
	return p.netns.Do(func(ns.NetNS) error {
		c, err := net.DialUDP("udp", &net.UDPAddr{IP: local.AsSlice()}, net.UDPAddrFromAddrPort(to))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("spoof?"))
		return err
	})
}
