package cni

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/rpc"
)

// fakeDaemon is a narrow TerwayBackend on a temp unix socket: it answers
// what the test configures and records every call. The real daemon's
// behaviour is tested end to end elsewhere; these tests are about what
// the plugin sends and how it treats the answers.
type fakeDaemon struct {
	rpc.UnimplementedTerwayBackendServer
	socket string
	srv    *grpc.Server

	mu sync.Mutex
	// alloc answers AllocIP; nil answers Unavailable.
	alloc func(*rpc.AllocIPRequest) (*rpc.AllocIPReply, error)
	// info answers GetIPInfo; nil answers Success=false.
	info func(*rpc.GetInfoRequest) (*rpc.GetInfoReply, error)
	// release answers ReleaseIP; nil answers Success.
	release func(*rpc.ReleaseIPRequest) error
	// status answers Status; nil answers Ready.
	status func() (*rpc.StatusReply, error)
	gcErr  error
	delay  time.Duration // added to AllocIP and ReleaseIP

	allocs   []*rpc.AllocIPRequest
	releases []*rpc.ReleaseIPRequest
	infos    []*rpc.GetInfoRequest
	events   []*rpc.EventRequest
	gcs      []*rpc.GCRequest
	statuses int
	// inflight and maxInflight count concurrent AllocIP/ReleaseIP calls,
	// overall and per container.
	inflight, maxInflight int
	perCID, maxPerCID     map[string]int
}

// startFakeDaemon serves a fakeDaemon until the test ends. The socket
// lives in a short temp dir: unix socket paths are limited to 108 bytes.
func startFakeDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "twcni")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	f := &fakeDaemon{socket: filepath.Join(dir, "eni.socket"), perCID: map[string]int{}, maxPerCID: map[string]int{}}
	l, err := net.Listen("unix", f.socket)
	if err != nil {
		t.Fatalf("listen %s: %v", f.socket, err)
	}
	f.srv = grpc.NewServer()
	rpc.RegisterTerwayBackendServer(f.srv, f)
	go func() { _ = f.srv.Serve(l) }()
	t.Cleanup(f.srv.Stop)
	return f
}

// stop takes the daemon down: its socket is gone, as after a crash.
func (f *fakeDaemon) stop() {
	f.srv.Stop()
	_ = os.Remove(f.socket)
}

func (f *fakeDaemon) enter(cid string) func() {
	f.mu.Lock()
	f.inflight++
	f.maxInflight = max(f.maxInflight, f.inflight)
	f.perCID[cid]++
	f.maxPerCID[cid] = max(f.maxPerCID[cid], f.perCID[cid])
	d := f.delay
	f.mu.Unlock()
	time.Sleep(d)
	return func() {
		f.mu.Lock()
		f.inflight--
		f.perCID[cid]--
		f.mu.Unlock()
	}
}

func (f *fakeDaemon) AllocIP(_ context.Context, r *rpc.AllocIPRequest) (*rpc.AllocIPReply, error) {
	defer f.enter(r.K8SPodInfraContainerId)()
	fn := record(f, &f.allocs, r, &f.alloc)
	if fn == nil {
		return nil, status.Error(codes.Unavailable, "no allocator configured")
	}
	return fn(r)
}

func (f *fakeDaemon) ReleaseIP(_ context.Context, r *rpc.ReleaseIPRequest) (*rpc.ReleaseIPReply, error) {
	defer f.enter(r.K8SPodInfraContainerId)()
	fn := record(f, &f.releases, r, &f.release)
	if fn != nil {
		if err := fn(r); err != nil {
			return nil, err
		}
	}
	return &rpc.ReleaseIPReply{Success: true}, nil
}

func (f *fakeDaemon) GetIPInfo(_ context.Context, r *rpc.GetInfoRequest) (*rpc.GetInfoReply, error) {
	fn := record(f, &f.infos, r, &f.info)
	if fn == nil {
		return &rpc.GetInfoReply{}, nil
	}
	return fn(r)
}

// record notes request r in calls and returns the answer configured in
// answer (nil for the default), both under the lock.
func record[R, A any](f *fakeDaemon, calls *[]R, r R, answer *A) A {
	f.mu.Lock()
	defer f.mu.Unlock()
	*calls = append(*calls, r)
	return *answer
}

func (f *fakeDaemon) RecordEvent(_ context.Context, r *rpc.EventRequest) (*rpc.EventReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, r)
	return &rpc.EventReply{Succeed: true}, nil
}

func (f *fakeDaemon) Status(context.Context, *rpc.StatusRequest) (*rpc.StatusReply, error) {
	f.mu.Lock()
	f.statuses++
	fn := f.status
	f.mu.Unlock()
	if fn == nil {
		return &rpc.StatusReply{Ready: true}, nil
	}
	return fn()
}

func (f *fakeDaemon) GarbageCollect(_ context.Context, r *rpc.GCRequest) (*rpc.GCReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gcs = append(f.gcs, r)
	if f.gcErr != nil {
		return nil, f.gcErr
	}
	return &rpc.GCReply{}, nil
}

// set runs fn under the lock, to configure answers.
func (f *fakeDaemon) set(fn func(f *fakeDaemon)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// snapshot returns copies of the recorded calls.
func (f *fakeDaemon) snapshot() (allocs []*rpc.AllocIPRequest, releases []*rpc.ReleaseIPRequest, events []*rpc.EventRequest, gcs []*rpc.GCRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append(allocs, f.allocs...), append(releases, f.releases...), append(events, f.events...), append(gcs, f.gcs...)
}

// fixedAlloc answers every AllocIP with ipType and nc, and GetIPInfo
// with the same for the container that got it, like the real daemon.
func (f *fakeDaemon) fixedAlloc(ipType rpc.IPType, nc func(r *rpc.AllocIPRequest) *rpc.NetConf) {
	held := map[string]*rpc.NetConf{}
	f.set(func(f *fakeDaemon) {
		f.alloc = func(r *rpc.AllocIPRequest) (*rpc.AllocIPReply, error) {
			c := nc(r)
			f.mu.Lock()
			held[r.K8SPodInfraContainerId] = c
			f.mu.Unlock()
			return &rpc.AllocIPReply{Success: true, IPType: ipType, IPv4: true, NetConfs: []*rpc.NetConf{c}}, nil
		}
		f.info = func(r *rpc.GetInfoRequest) (*rpc.GetInfoReply, error) {
			f.mu.Lock()
			c, ok := held[r.K8SPodInfraContainerId]
			f.mu.Unlock()
			if !ok {
				return &rpc.GetInfoReply{IPType: ipType}, nil
			}
			return &rpc.GetInfoReply{Success: true, IPType: ipType, IPv4: true, NetConfs: []*rpc.NetConf{c}}, nil
		}
		f.release = func(r *rpc.ReleaseIPRequest) error {
			f.mu.Lock()
			delete(held, r.K8SPodInfraContainerId)
			f.mu.Unlock()
			return nil
		}
	})
}

// eniNetConf is an ENI-mode answer: address in the lab's vSwitch
// 192.168.1.0/24 (gateway .253) on the ENI with mac.
func eniNetConf(ip, mac string) *rpc.NetConf {
	gw := &rpc.IPSet{IPv4: "192.168.1.253"}
	return &rpc.NetConf{
		BasicInfo: &rpc.BasicInfo{PodIP: &rpc.IPSet{IPv4: ip}, PodCIDR: &rpc.IPSet{IPv4: "192.168.1.0/24"},
			GatewayIP: gw, ServiceCIDR: &rpc.IPSet{IPv4: "10.96.0.0/12"}},
		ENIInfo:      &rpc.ENIInfo{MAC: mac, GatewayIP: gw},
		Pod:          &rpc.Pod{},
		DefaultRoute: true,
	}
}

// vpcNetConf is a VPC-mode answer: an address of the node's podCIDR.
func vpcNetConf(ip string) *rpc.NetConf {
	return &rpc.NetConf{
		BasicInfo: &rpc.BasicInfo{PodIP: &rpc.IPSet{IPv4: ip}, PodCIDR: &rpc.IPSet{IPv4: "172.20.1.0/24"},
			GatewayIP: &rpc.IPSet{IPv4: "169.254.1.1"}, ServiceCIDR: &rpc.IPSet{IPv4: "10.96.0.0/12"}},
		Pod:          &rpc.Pod{},
		DefaultRoute: true,
	}
}

// podArgs is CNI_ARGS as containerd sends them.
func podArgs(ns, name, cid string) string {
	return fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s;K8S_POD_UID=uid-%s", ns, name, cid, name)
}
