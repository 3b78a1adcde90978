package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

func TestStatusReportsExhaustionOnlyWhenAskedTo(t *testing.T) {
	for _, optIn := range []bool{false, true} {
		t.Run(fmt.Sprintf("not_ready_on_ip_exhaustion=%v", optIn), func(t *testing.T) {
			l := newLab(t)
			l.conf = strings.Replace(l.conf, `"max_pool_size":5`, fmt.Sprintf(`"max_pool_size":0,"not_ready_on_ip_exhaustion":%v`, optIn), 1)
			for _, n := range []string{"a", "b", "c"} {
				l.pod("st", n, nil)
			}
			_, c, _ := l.daemon(func(o *Options) { o.Mode = mode.ENIOnly })
			st, err := c.Status(ctxT(t), &rpc.StatusRequest{})
			if err != nil || !st.Ready || st.Exhausted || st.Capacity != 3 {
				t.Fatalf("fresh daemon: %+v %v", st, err)
			}
			for _, n := range []string{"a", "b", "c"} {
				allocOK(t, c, "st", n, "c-"+n)
			}
			st, err = c.Status(ctxT(t), &rpc.StatusRequest{})
			if err != nil || !st.Exhausted || st.InUse != 3 || st.Ready == optIn {
				t.Fatalf("all ENIs in use: %+v %v", st, err)
			}
			if optIn && !strings.Contains(st.Reason, "not_ready_on_ip_exhaustion") {
				t.Fatalf("reason %q", st.Reason)
			}
		})
	}
}

func TestGarbageCollectReleasesWhatTheRuntimeForgot(t *testing.T) {
	l := newLab(t)
	for i := 0; i < 4; i++ {
		l.pod("gc", fmt.Sprintf("p%d", i), nil)
	}
	d, c, _ := l.daemon(nil)
	for i := 0; i < 4; i++ {
		allocOK(t, c, "gc", fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i))
	}
	// p0..p2 were attached long ago; p3 just now (inside the grace).
	for i := 0; i < 3; i++ {
		a, err := d.store.Get("gc", fmt.Sprintf("p%d", i))
		if err != nil {
			t.Fatal(err)
		}
		a.CreatedAt = a.CreatedAt.Add(-2 * config.DefaultCNIGCGrace)
		if err := d.store.Put(a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.GarbageCollect(ctxT(t), &rpc.GCRequest{ValidAttachments: []*rpc.Attachment{{IfName: "eth0"}}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("attachment without container: %v", err)
	}
	// The runtime knows c0 (ifname defaulted) and c1 on another ifname.
	r, err := c.GarbageCollect(ctxT(t), &rpc.GCRequest{ValidAttachments: []*rpc.Attachment{{ContainerID: "c0"}, {ContainerID: "c1", IfName: "eth1"}}})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(r.Released)
	if !slices.Equal(r.Released, []string{"gc/p1", "gc/p2"}) {
		t.Fatalf("released %v, want gc/p1 gc/p2", r.Released)
	}
	for i, want := range []bool{true, false, false, true} {
		if _, ok := d.holds(fmt.Sprintf("gc/p%d", i)); ok != want {
			t.Fatalf("p%d held=%v after GC, want %v", i, ok, want)
		}
	}
	testwait.Until(t, waitLimit, "an AllocIPSucceed event on gc/p0", func() bool {
		return strings.Contains(strings.Join(podEvents(t, l, "gc", "p0"), "\n"), "AllocIPSucceed: Alloc IP 192.168.")
	})
	// Idempotent: nothing more to release.
	if r, err := c.GarbageCollect(ctxT(t), &rpc.GCRequest{ValidAttachments: []*rpc.Attachment{{ContainerID: "c0"}}}); err != nil || len(r.Released) != 0 {
		t.Fatalf("second GC: %v %v", r, err)
	}
}

func TestPoolGauges(t *testing.T) {
	l := newLab(t)
	reg := prometheus.NewRegistry()
	for i := 0; i < 3; i++ {
		l.pod("m", fmt.Sprintf("p%d", i), nil)
	}
	_, c, _ := l.daemon(func(o *Options) { o.Registerer = reg })
	for i := 0; i < 3; i++ {
		allocOK(t, c, "m", fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i))
	}
	got := map[string]float64{}
	testwait.For(t, 10*time.Second, "the pool's gauges", func() error {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.Metric {
				if m.Gauge != nil {
					got[mf.GetName()] = m.Gauge.GetValue()
				}
			}
		}
		if got["terway_resource_pool_inuse_count"] == 3 && got["terway_resource_pool_total_count"] >= 3 &&
			got["terway_eniip_factory_eni_count"] >= 1 && got["terway_resource_pool_idle_count"] == got["terway_resource_pool_total_count"]-3 {
			return nil
		}
		return fmt.Errorf("gauges %v", got)
	})
}

// While the daemon initialises, its socket already answers: STATUS says
// what it is doing, every other call is Unavailable (CNI "try again").
func TestStatusWhileInitialising(t *testing.T) {
	l := newLab(t)
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	md := l.cloud.MetadataHandler(node1)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
		md.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	l.conf = strings.Replace(l.conf, l.mdURL, slow.URL, 1)
	cfg := l.daemonConfig()
	type result struct {
		d   *Daemon
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := New(ctxT(t), Options{Mode: mode.ENIMultiIP, Config: cfg, NodeName: nodeName, Kube: clientset.Wrap(l.kube), StoreNoSync: true})
		done <- result{d, err}
	}()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon never asked the metadata service")
	}
	conn, err := grpc.NewClient("unix://"+cfg.SocketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := rpc.NewTerwayBackendClient(conn)
	st, err := c.Status(ctxT(t), &rpc.StatusRequest{})
	if err != nil || st.Ready || !strings.Contains(st.Reason, "initialising: reading the instance") {
		t.Fatalf("status while initialising: %+v %v", st, err)
	}
	l.pod("init", "p", nil)
	if _, err := alloc(t, c, "init", "p", "c1"); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "initialising") {
		t.Fatalf("AllocIP while initialising: %v", err)
	}
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	served := make(chan error, 1)
	go func() { served <- r.d.Serve(context.Background()) }()
	<-r.d.Ready()
	if st, err := c.Status(ctxT(t), &rpc.StatusRequest{}); err != nil || !st.Ready {
		t.Fatalf("status once serving: %+v %v", st, err)
	}
	if _, err := alloc(t, c, "init", "p", "c1"); err != nil {
		t.Fatalf("AllocIP once serving: %v", err)
	}
	if err := r.d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
