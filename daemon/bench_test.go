package daemon

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

// bigNode makes node1 an ecs.g7.4xlarge (7 secondary ENIs × 30 = 210
// addresses), so that 100 pods fit.
func bigNode(s *fakecloud.Spec, _ *fakecloud.Options) {
	for i := range s.Instances {
		if s.Instances[i].ID == node1 {
			s.Instances[i].InstanceType = "ecs.g7.4xlarge"
		}
	}
}

// realistic sets fakecloud to real-cloud delays (time scale 1) and the
// daemon's polls to what such delays need.
func realistic(l *lab) {
	for _, r := range [][2]string{
		{`"ip_batch_window":"10ms"`, `"ip_batch_window":"200ms"`},
		{`"wait_eni_status":{"Duration":"5ms","Factor":1.2,"Steps":12}`, `"wait_eni_status":{"Duration":"200ms","Factor":1.2,"Steps":20,"Cap":"1s"}`},
		{`"meta_assign_private_ip":{"Duration":"5ms","Steps":10}`, `"meta_assign_private_ip":{"Duration":"100ms","Steps":10}`},
	} {
		l.conf = strings.Replace(l.conf, r[0], r[1], 1)
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkWarmAllocRelease is the warm path kubelet sees: AllocIP and
// ReleaseIP of one pod over the unix socket, served from the pool, with
// 100 other pods allocated and the store fsyncing every commit; with the
// pod-ips annotation written (enable_patch_pod_ips, the default) and
// without. The API server answers the patches at once, as a real one
// does from another machine: the fake clientset's tracker would spend
// milliseconds of this process's CPU on each (it rebuilds a REST mapper
// per call), which measures client-go's test double, not the daemon.
// pod-patches/op counts them (the warm pod's address alternates, so
// nearly every AllocIP patches).
func BenchmarkWarmAllocRelease(b *testing.B) {
	b.Run("pod-ips=on", func(b *testing.B) { benchWarmAllocRelease(b, true) })
	b.Run("pod-ips=off", func(b *testing.B) { benchWarmAllocRelease(b, false) })
}

func benchWarmAllocRelease(b *testing.B, patchPodIPs bool) {
	l := newLab(b, bigNode)
	l.conf = strings.Replace(l.conf, `"max_pool_size":5,"min_pool_size":0`,
		fmt.Sprintf(`"max_pool_size":10,"min_pool_size":5,"enable_patch_pod_ips":%t`, patchPodIPs), 1)
	var patches atomic.Int64
	l.kube.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patches.Add(1)
		return true, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: a.GetNamespace(), Name: a.(k8stesting.PatchAction).GetName()}}, nil
	})
	for i := 0; i < 100; i++ {
		l.pod("bench", fmt.Sprintf("p%03d", i), nil)
	}
	l.pod("bench", "warm", nil)
	d, c, _ := l.daemon(func(o *Options) { o.StoreNoSync = false })
	for i := 0; i < 100; i++ {
		allocOK(b, c, "bench", fmt.Sprintf("p%03d", i), fmt.Sprintf("c%03d", i))
	}
	testwait.Until(b, waitLimit, "a settled pool", func() bool { st := d.pool.Stats(); return st.Idle >= 5 && st.Inflight == 0 })
	ctx := context.Background()
	var pairs, allocs, releases []time.Duration
	base := mutatingCalls(l)
	patches0 := patches.Load()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := "w" + strconv.Itoa(i)
		t0 := time.Now()
		if _, err := c.AllocIP(ctx, &rpc.AllocIPRequest{K8SPodNamespace: "bench", K8SPodName: "warm", K8SPodInfraContainerId: id,
			Netns: "/var/run/netns/" + id, IfName: "eth0"}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := c.ReleaseIP(ctx, &rpc.ReleaseIPRequest{K8SPodNamespace: "bench", K8SPodName: "warm", K8SPodInfraContainerId: id}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		pairs, allocs, releases = append(pairs, t2.Sub(t0)), append(allocs, t1.Sub(t0)), append(releases, t2.Sub(t1))
	}
	b.StopTimer()
	b.ReportMetric(msf(percentile(pairs, 0.5)), "p50-pair-ms")
	b.ReportMetric(msf(percentile(pairs, 0.99)), "p99-pair-ms")
	b.ReportMetric(msf(percentile(allocs, 0.99)), "p99-alloc-ms")
	b.ReportMetric(msf(percentile(releases, 0.99)), "p99-release-ms")
	b.ReportMetric(float64(patches.Load()-patches0)/float64(b.N), "pod-patches/op")
	if mut := mutatingCalls(l) - base; mut > 2 {
		b.Fatalf("the warm path made %d mutating cloud calls", mut)
	}
}

var mutatingActions = []string{"CreateNetworkInterface", "AttachNetworkInterface", "AssignPrivateIpAddresses",
	"UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface"}

func mutatingCalls(l *lab) int64 {
	var n int64
	for _, a := range mutatingActions {
		n += l.cloud.CallCount(fakecloud.CallFilter{Action: a})
	}
	return n
}

// BenchmarkBurst100 starts 100 pods at once on an empty node at
// real-cloud latencies (fakecloud time scale 1: ENI attach, metadata lag)
// and reports how long the last one waited and the calls by action.
// Run it with -benchtime=1x: one iteration is one burst on a new node.
func BenchmarkBurst100(b *testing.B) {
	var took []time.Duration
	calls := map[string]int64{}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		l := newLab(b, bigNode, func(_ *fakecloud.Spec, o *fakecloud.Options) { o.TimeScale = 1 })
		realistic(l)
		l.conf = strings.Replace(l.conf, `"max_pool_size":5`, `"max_pool_size":5`, 1)
		for j := 0; j < 100; j++ {
			l.pod("burst", fmt.Sprintf("p%03d", j), nil)
		}
		_, c, stop := l.daemon(nil)
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for j := 0; j < 100; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				name := fmt.Sprintf("p%03d", j)
				_, err := c.AllocIP(ctx, &rpc.AllocIPRequest{K8SPodNamespace: "burst", K8SPodName: name, K8SPodInfraContainerId: "c" + name})
				errs <- err
			}()
		}
		wg.Wait()
		took = append(took, time.Since(start))
		b.StopTimer()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		for _, s := range l.cloud.Calls() {
			calls[s.Action+"/"+s.Outcome] += s.Count
		}
		stop()
		b.StartTimer()
	}
	b.ReportMetric(msf(percentile(took, 0.5))/1000, "s-to-100-pods")
	keys := make([]string, 0, len(calls))
	for k := range calls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.ReportMetric(float64(calls[k])/float64(b.N), k+"-calls")
	}
}

// BenchmarkChurn is a node under steady churn with Terway's default pool
// (min 0, max 5) and idle reclaim on: rolling updates replace 1–6 pods at
// a time (new pods first, then the old ones go) around 40 running pods.
// It reports mutating cloud calls per pod started and the idle addresses
// the node held on average. Times are scaled down 100× (fakecloud time
// scale 0.01; idle reclaim after 600ms ≙ 1m, every 100ms ≙ 10s; rounds
// every 50ms ≙ 5s).
func BenchmarkChurn(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		l := newLab(b, bigNode)
		l.conf = strings.Replace(l.conf, `"max_pool_size":5,"min_pool_size":0`,
			`"max_pool_size":5,"min_pool_size":0,"idle_ip_reclaim_after":"600ms","idle_ip_reclaim_interval":"100ms"`, 1)
		d, c, stop := l.daemon(nil)
		rng := rand.New(rand.NewPCG(7, uint64(i)))
		var running []string
		seq := 0
		start := func(n int) {
			for j := 0; j < n; j++ {
				name := fmt.Sprintf("p%05d", seq)
				seq++
				l.pod("churn", name, nil)
				allocOK(b, c, "churn", name, "c"+name)
				running = append(running, name)
			}
		}
		stopPods := func(n int) {
			for j := 0; j < n; j++ {
				k := rng.IntN(len(running))
				name := running[k]
				running = slices.Delete(running, k, k+1)
				if _, err := c.ReleaseIP(ctxT(b), &rpc.ReleaseIPRequest{K8SPodNamespace: "churn", K8SPodName: name, K8SPodInfraContainerId: "c" + name}); err != nil {
					b.Fatal(err)
				}
				l.deletePod("churn", name)
			}
		}
		start(40)
		l.settle(d)
		base, started := mutatingCalls(l), 0
		var idleSum, samples int
		b.StartTimer()
		for round := 0; round < 300; round++ {
			n := 1 + rng.IntN(6)
			start(n)
			stopPods(n)
			started += n
			time.Sleep(50 * time.Millisecond) // the churn's rhythm: a round every 5s, scaled
			idleSum += d.pool.Stats().Idle
			samples++
		}
		b.StopTimer()
		mut := mutatingCalls(l) - base
		// A quiet spell of up to 1.5s (2.5m): idle reclaim gives the warm
		// addresses back, down to min_pool_size 0. Nothing allocates
		// meanwhile, so the spell may end once they are all back.
		_ = poll(50*time.Millisecond, 1500*time.Millisecond, func() bool { return d.pool.Stats().Idle == 0 })
		b.ReportMetric(float64(d.pool.Stats().Idle), "idle-ips-after-quiet")
		b.ReportMetric(float64(mut)/float64(started), "mutating-calls/pod")
		b.ReportMetric(float64(idleSum)/float64(samples), "avg-idle-ips")
		b.ReportMetric(float64(started), "pods-started")
		stop()
		b.StartTimer()
	}
}

// BenchmarkDaemonRSS runs terwayd as a node runs it — the binary TERWAYD
// names (make bench-daemon passes bin/terwayd), else one built here with
// the environment's GOFLAGS — against fakecloud and an HTTP API server,
// allocates 100 pods through it and reports its peak resident set
// (VmHWM). A daemon inside this test binary would count the tests' code
// (and the fake clientset's every API group) as the daemon's.
func BenchmarkDaemonRSS(b *testing.B) {
	bin := terwaydBinary(b)
	for i := 0; i < b.N; i++ {
		l := newLab(b, bigNode)
		var pods []string
		for j := 0; j < 100; j++ {
			pods = append(pods, fmt.Sprintf("rss/p%03d", j))
		}
		ch := l.startTerwayd(bin, pods)
		for j := 0; j < 100; j++ {
			if _, err := alloc(b, ch.client, "rss", fmt.Sprintf("p%03d", j), fmt.Sprintf("c%03d", j)); err != nil {
				b.Fatal(err)
			}
		}
		hwm, err := vmHWM(ch.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(hwm)/1024, "VmHWM-MiB")
		if path := os.Getenv("RSS_DEBUG"); path != "" { // where to copy /proc/<pid>/smaps, and the heap profile
			sm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", ch.cmd.Process.Pid))
			_ = os.WriteFile(path, sm, 0o600)
			if err := saveHeapProfile(filepath.Join(l.dir, "debug.socket"), path+".heap"); err != nil {
				b.Logf("heap profile: %v", err)
			}
		}
		ch.kill()
	}
}

// saveHeapProfile fetches the daemon's heap profile from its debug socket.
func saveHeapProfile(socket, path string) error {
	c := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}, Timeout: 30 * time.Second}
	resp, err := c.Get("http://terwayd/debug/pprof/heap")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// terwaydBinary is $TERWAYD, or terwayd built into a temporary directory.
func terwaydBinary(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv("TERWAYD"); bin != "" {
		return bin
	}
	bin := filepath.Join(b.TempDir(), "terwayd")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/terway-sim/terway/cmd/terwayd").CombinedOutput()
	if err != nil {
		b.Fatalf("build terwayd (or set TERWAYD): %v\n%s", err, out)
	}
	return bin
}

// vmHWM reads a process's peak resident set in KiB.
func vmHWM(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
