package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/kubeserve"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

// The kill tests run the daemon as a separate process — this test binary
// re-executed with childEnv set — so that it can be SIGKILLed while
// fakecloud holds one of its calls, then restarted.
const childEnv = "TERWAYD_TEST_CHILD"

// childMain runs a daemon with a fake clientset holding the pods listed in
// the file named by TERWAYD_TEST_PODS, until it is killed.
func childMain() int {
	return serveChild(slog.LevelDebug, func(context.Context, *slog.Logger) (kubernetes.Interface, error) {
		var names []string
		if b, err := os.ReadFile(os.Getenv("TERWAYD_TEST_PODS")); err == nil {
			_ = json.Unmarshal(b, &names)
		}
		// The simple tracker: the field-managed one parses every
		// apply-configuration type at creation (2.5 MiB of heap).
		return fake.NewSimpleClientset(podObjects(names)...), nil
	})
}

// serveChild is the main of a daemon process of the tests: a daemon of
// the config TERWAYD_TEST_CONFIG names, logging at level to stderr, with
// the Kubernetes API kube makes, serves until SIGTERM (or a kill). It
// returns the exit code: 2 when the setup fails, 3 when the daemon does
// not start, 4 when it stops with an error.
func serveChild(level slog.Level, kube func(context.Context, *slog.Logger) (kubernetes.Interface, error)) int {
	cfg, err := config.ParseFile(os.Getenv("TERWAYD_TEST_CONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cs, err := kube(ctx, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	d, err := New(ctx, Options{Mode: mode.ENIMultiIP, Config: cfg, NodeName: nodeName, Kube: clientset.Wrap(cs), Logger: logger})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if err := d.Serve(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	return 0
}

type child struct {
	t      testing.TB
	cmd    *exec.Cmd
	conn   *grpc.ClientConn
	client rpc.TerwayBackendClient
	trace  rpc.TerwayTracingClient
}

// childPods writes pods ("namespace/name") as the child's pods file and
// returns them as objects of the node, with the node itself.
func (l *lab) childPods(pods []string) (path string, objs []runtime.Object) {
	l.t.Helper()
	path = filepath.Join(l.dir, "pods.json")
	b, _ := json.Marshal(pods)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		l.t.Fatal(err)
	}
	return path, podObjects(pods)
}

// podObjects is the node and its running pods ("namespace/name").
func podObjects(pods []string) []runtime.Object {
	objs := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}}
	for _, n := range pods {
		ns, name, _ := strings.Cut(n, "/")
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(n)},
			Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	}
	return objs
}

// configFile writes the lab's eni_conf for a daemon process.
func (l *lab) configFile() string {
	l.t.Helper()
	path := filepath.Join(l.dir, "eni_conf")
	if err := os.WriteFile(path, []byte(l.conf), 0o600); err != nil {
		l.t.Fatal(err)
	}
	return path
}

// startChild runs the daemon process of l with pods and waits until it
// serves.
func (l *lab) startChild(pods []string) *child {
	l.t.Helper()
	podsPath, _ := l.childPods(pods)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "TERWAYD_TEST_CONFIG="+l.configFile(), "TERWAYD_TEST_PODS="+podsPath)
	return l.runChild(cmd)
}

// startTerwayd runs the terwayd binary bin as the daemon of l, with its
// API server an HTTP one over a fake clientset holding pods, and waits
// until it serves. It never touches the host: no host network namespace
// to clean, no device plugin, its debug socket in the lab's directory.
func (l *lab) startTerwayd(bin string, pods []string) *child {
	l.t.Helper()
	srv := kubeserve.New(fake.NewSimpleClientset(podObjects(pods)...))
	l.t.Cleanup(srv.Close)
	kubeconfig, err := srv.Kubeconfig(l.dir)
	if err != nil {
		l.t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", l.configFile(), "--kubeconfig", kubeconfig, "--host-netns=",
		"--device-plugin-dir=", "--readonly-listen", "unix://"+filepath.Join(l.dir, "debug.socket"))
	cmd.Env = append(os.Environ(), "NODE_NAME="+nodeName, "POOL_CHECK_PERIOD_SECONDS=0")
	return l.runChild(cmd)
}

// runChild starts cmd, a daemon process of l, and waits until it serves.
func (l *lab) runChild(cmd *exec.Cmd) *child {
	l.t.Helper()
	// The daemon's log goes to a file, shown when the test fails.
	logf, err := os.CreateTemp(l.dir, "child-*.log")
	if err != nil {
		l.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	logf.Close()
	l.t.Cleanup(func() {
		if l.t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			l.t.Logf("daemon process log (%s), last part:\n%s", logf.Name(), b)
		}
	})
	c := &child{t: l.t, cmd: cmd}
	l.t.Cleanup(c.kill)
	cfg, _ := config.Parse([]byte(l.conf))
	conn, err := grpc.NewClient("unix://"+cfg.SocketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		l.t.Fatal(err)
	}
	c.conn, c.client, c.trace = conn, rpc.NewTerwayBackendClient(conn), rpc.NewTerwayTracingClient(conn)
	testwait.For(l.t, 60*time.Second, "the daemon process to come up", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.trace.GetResourceTypes(ctx, &rpc.Placeholder{})
		return err
	})
	return c
}

func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		_ = c.cmd.Wait()
	}
	if c.conn != nil {
		c.conn.Close()
	}
}

// poolAddresses returns the daemon's addresses by IPv4: "<eni> <state>
// <owner>".
func (c *child) poolAddresses() map[string]string {
	c.t.Helper()
	r, err := c.trace.GetResourceTrace(ctxT(c.t), &rpc.ResourceTypeNameRequest{Type: tracePool, Name: "default"})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range r.Trace {
		if ip, ok := strings.CutPrefix(e.Key, "ip/"); ok {
			out[ip] = e.Value
		}
	}
	return out
}

// gcRounds reads how many rounds the daemon's GC loop has completed.
func (c *child) gcRounds() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.trace.GetResourceTrace(ctx, &rpc.ResourceTypeNameRequest{Type: traceService, Name: "default"})
	if err != nil {
		return 0, err
	}
	for _, e := range r.Trace {
		if e.Key == "gc_rounds" {
			return strconv.Atoi(e.Value)
		}
	}
	return 0, errors.New("the service trace has no gc_rounds")
}

// waitGCRounds waits until the daemon has completed n more GC rounds
// than when called: the first may have begun before the call, the others
// began after it.
func (c *child) waitGCRounds(n int) {
	c.t.Helper()
	from, err := c.gcRounds()
	if err != nil {
		c.t.Fatal(err)
	}
	testwait.For(c.t, waitLimit, fmt.Sprintf("%d GC rounds of the daemon", n), func() error {
		got, err := c.gcRounds()
		if err == nil && got < from+n {
			err = fmt.Errorf("%d of %d rounds", got-from, n)
		}
		return err
	})
}

// checkAccounted asserts the end state every kill must lead to: each ENI
// tagged for this node is attached and fully known to the daemon, no
// orphan is left, the daemon holds no address the cloud did not assign,
// the store agrees with the pool, and no address is handed out twice.
func (l *lab) checkAccounted(c *child) {
	l.t.Helper()
	testwait.For(l.t, 30*time.Second, "every tagged ENI and address accounted for after restart and GC", func() error {
		var cloudAddrs, problems []string
		for _, e := range l.cloud.ENIs() {
			if e.Tags["terway.alibabacloud.com/instance-id"] != node1 {
				continue
			}
			if e.Status != fakecloud.ENIInUse || e.InstanceID != node1 {
				problems = append(problems, fmt.Sprintf("ENI %s is %s on %q", e.ID, e.Status, e.InstanceID))
				continue
			}
			cloudAddrs = append(cloudAddrs, e.PrimaryIP.String())
			for _, a := range e.IPv4 {
				cloudAddrs = append(cloudAddrs, a.String())
			}
		}
		pool := c.poolAddresses()
		for _, a := range cloudAddrs {
			if _, ok := pool[a]; !ok {
				problems = append(problems, "cloud address "+a+" unknown to the daemon")
			}
		}
		for a, v := range pool {
			if !contains(cloudAddrs, a) {
				problems = append(problems, "daemon address "+a+" ("+v+") not assigned in the cloud")
			}
		}
		if len(problems) > 0 {
			sort.Strings(problems)
			return fmt.Errorf("not accounted for:\n%s", strings.Join(problems, "\n"))
		}
		return nil
	})
	m, err := c.trace.GetResourceMapping(ctxT(l.t), &rpc.Placeholder{})
	if err != nil {
		l.t.Fatal(err)
	}
	seen := map[string]string{}
	for _, e := range m.Info {
		if e.Type == rpc.ResourceMappingType_MappingTypeError {
			l.t.Fatalf("store and pool disagree on %s: store %q pool %q", e.PodName, e.ResourceName, e.FactoryResourceName)
		}
		if e.ResourceName == "" {
			continue // an idle address (max_pool_size > 0): no pod holds it
		}
		if prev, dup := seen[e.ResourceName]; dup {
			l.t.Fatalf("%s held by %s and %s", e.ResourceName, prev, e.PodName)
		}
		seen[e.ResourceName] = e.PodName
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

type killCase struct {
	name string
	// prepare runs with the first daemon before the fault is armed.
	prepare func(t *testing.T, l *lab, c *child)
	fault   fakecloud.Fault
	// trigger makes the daemon reach the step (runs in a goroutine).
	trigger func(t *testing.T, c *child)
	// waitFor, when set, replaces waiting for the fault to hold a call.
	waitFor func(l *lab) bool
}

func allocAsync(t *testing.T, c *child, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = c.client.AllocIP(ctx, &rpc.AllocIPRequest{K8SPodNamespace: "ns", K8SPodName: name, K8SPodInfraContainerId: name + "-c"})
}

func mustAlloc(t *testing.T, c *child, name string) {
	t.Helper()
	if _, err := c.client.AllocIP(ctxT(t), &rpc.AllocIPRequest{K8SPodNamespace: "ns", K8SPodName: name, K8SPodInfraContainerId: name + "-c"}); err != nil {
		t.Fatalf("alloc %s: %v", name, err)
	}
}

// releaseAsync releases from a trigger goroutine: the daemon may be
// killed meanwhile, so errors are expected and ignored.
func releaseAsync(c *child, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = c.client.ReleaseIP(ctx, &rpc.ReleaseIPRequest{K8SPodNamespace: "ns", K8SPodName: name, K8SPodInfraContainerId: name + "-c"})
}

// TestKilledAtEachStep SIGKILLs the daemon process while fakecloud holds
// it at each step of the ENI and address lifecycle, restarts it, and
// checks that after one GC round every tagged ENI and address is
// accounted for, with no duplicate and no orphan.
func TestKilledAtEachStep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts daemon processes; skipped in -short mode")
	}
	pods := []string{"ns/p0", "ns/p1", "ns/p2", "ns/p3", "ns/p4"}
	cases := []killCase{
		{name: "create applied, answer lost",
			fault:   fakecloud.Fault{Kind: fakecloud.FaultPause, Action: "CreateNetworkInterface", Step: fakecloud.StepAfter},
			trigger: func(t *testing.T, c *child) { allocAsync(t, c, "p0") }},
		{name: "attaching",
			fault:   fakecloud.Fault{Kind: fakecloud.FaultPause, Action: "AttachNetworkInterface", Step: fakecloud.StepAfter},
			trigger: func(t *testing.T, c *child) { allocAsync(t, c, "p0") }},
		{name: "InUse before metadata shows it",
			prepare: func(t *testing.T, l *lab, c *child) {
				s := l.cloud.Settings()
				s.MetadataLag = fakecloud.Duration(150 * time.Second) // 1.5s at time scale 0.01
				if err := l.cloud.UpdateSettings(s); err != nil {
					t.Fatal(err)
				}
			},
			trigger: func(t *testing.T, c *child) { allocAsync(t, c, "p0") },
			waitFor: func(l *lab) bool {
				for _, e := range l.cloud.ENIs() {
					if e.Type == fakecloud.ENITypeSecondary && e.Status == fakecloud.ENIInUse {
						return true
					}
				}
				return false
			}},
		{name: "assign applied, answer lost",
			prepare: func(t *testing.T, l *lab, c *child) { mustAlloc(t, c, "p0") },
			fault:   fakecloud.Fault{Kind: fakecloud.FaultPause, Action: "AssignPrivateIpAddresses", Step: fakecloud.StepAfter},
			trigger: func(t *testing.T, c *child) { allocAsync(t, c, "p1") }},
		{name: "unassign",
			prepare: func(t *testing.T, l *lab, c *child) {
				for _, p := range []string{"p0", "p1", "p2", "p3"} {
					mustAlloc(t, c, p)
				}
			},
			fault: fakecloud.Fault{Kind: fakecloud.FaultPause, Action: "UnassignPrivateIpAddresses", Step: fakecloud.StepAfter},
			trigger: func(t *testing.T, c *child) {
				for _, p := range []string{"p1", "p2", "p3"} {
					releaseAsync(c, p)
				}
			}},
		{name: "detaching",
			prepare: func(t *testing.T, l *lab, c *child) { mustAlloc(t, c, "p0") },
			fault:   fakecloud.Fault{Kind: fakecloud.FaultPause, Action: "DetachNetworkInterface", Step: fakecloud.StepAfter},
			trigger: func(t *testing.T, c *child) { releaseAsync(c, "p0") }},
		{name: "delete",
			prepare: func(t *testing.T, l *lab, c *child) { mustAlloc(t, c, "p0") },
			fault:   fakecloud.Fault{Kind: fakecloud.FaultPause, Action: "DeleteNetworkInterface", Step: fakecloud.StepAfter},
			trigger: func(t *testing.T, c *child) { releaseAsync(c, "p0") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t)
			// A short GC period: "after one GC round" is part of the check.
			l.conf = strings.Replace(l.conf, `"gc_period":"1h"`, `"gc_period":"300ms"`, 1)
			l.conf = strings.Replace(l.conf, `"max_pool_size":5`, `"max_pool_size":0`, 1)
			c := l.startChild(pods)
			if tc.prepare != nil {
				tc.prepare(t, l, c)
			}
			name := ""
			if tc.fault.Kind != "" {
				f := tc.fault
				f.Name = "hold"
				var err error
				if name, err = l.cloud.AddFault(f); err != nil {
					t.Fatal(err)
				}
			}
			go tc.trigger(t, c)
			if tc.waitFor != nil {
				testwait.Until(t, 30*time.Second, "the daemon to reach the step", func() bool { return tc.waitFor(l) })
			} else if err := l.cloud.WaitHeld(ctxT(t), name, 1); err != nil {
				t.Fatal(err)
			}
			c.kill()
			if name != "" {
				l.cloud.RemoveFault(name) // the cloud finishes what it held
			}
			c2 := l.startChild(pods)
			c2.waitGCRounds(1) // a new process: a whole GC round
			l.checkAccounted(c2)
			// The restarted daemon serves without handing anything out twice.
			for _, p := range []string{"p2", "p3", "p4"} {
				mustAlloc(t, c2, p)
			}
			l.checkAccounted(c2)
		})
	}
}
