package deviceplugin_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/daemon/deviceplugin"
	"github.com/terway-sim/terway/internal/testwait"
)

// waitLimit is generous: -race on a loaded 2-core CI machine is slow.
const waitLimit = 30 * time.Second

var endpointName = regexp.MustCompile(`^[0-9]+-eni\.sock$`)

// fakeKubelet is kubelet's registration service on <dir>/kubelet.sock.
type fakeKubelet struct {
	v1beta1.UnimplementedRegistrationServer
	sock     string
	srv      *grpc.Server
	done     chan struct{}
	reqs     chan *v1beta1.RegisterRequest
	refuse   atomic.Int32 // Register calls still to refuse
	attempts atomic.Int32
	once     sync.Once
}

func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	k := &fakeKubelet{
		sock: filepath.Join(dir, "kubelet.sock"),
		srv:  grpc.NewServer(),
		done: make(chan struct{}),
		reqs: make(chan *v1beta1.RegisterRequest, 16),
	}
	lis, err := net.Listen("unix", k.sock)
	if err != nil {
		t.Fatalf("fake kubelet: %v", err)
	}
	v1beta1.RegisterRegistrationServer(k.srv, k)
	go func() {
		defer close(k.done)
		_ = k.srv.Serve(lis)
	}()
	t.Cleanup(k.stop)
	return k
}

func (k *fakeKubelet) Register(_ context.Context, r *v1beta1.RegisterRequest) (*v1beta1.Empty, error) {
	k.attempts.Add(1)
	if k.refuse.Add(-1) >= 0 {
		return nil, status.Error(codes.Unavailable, "fake kubelet refuses")
	}
	select {
	case k.reqs <- r:
	default:
	}
	return &v1beta1.Empty{}, nil
}

// stop shuts the kubelet down and removes its socket, as a dying kubelet's
// successor would find it.
func (k *fakeKubelet) stop() {
	k.once.Do(func() {
		k.srv.Stop()
		<-k.done
		_ = os.Remove(k.sock)
	})
}

type harness struct {
	t      *testing.T
	dir    string
	clk    *testingclock.FakeClock
	plugin *deviceplugin.Plugin
	cancel context.CancelFunc
	runErr chan error
}

func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// newHarness builds a plugin on a fake clock in dir; start runs it.
func newHarness(t *testing.T, dir, resource string) *harness {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	return &harness{
		t:   t,
		dir: dir,
		clk: clk,
		plugin: deviceplugin.New(deviceplugin.Options{
			ResourceName: resource,
			Dir:          dir,
			Logger:       testLogger(t),
			Clock:        clk,
		}),
		runErr: make(chan error, 1),
	}
}

func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.runErr <- h.plugin.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		select {
		case <-h.runErr:
		case <-time.After(waitLimit):
			h.t.Error("Run did not return after cancel")
		}
	})
}

// stop cancels Run and returns its result.
func (h *harness) stop() error {
	h.t.Helper()
	h.cancel()
	select {
	case err := <-h.runErr:
		h.runErr <- err // for the cleanup
		return err
	case <-time.After(waitLimit):
		h.t.Fatal("Run did not return after cancel")
		return nil
	}
}

// registered runs a kubelet and a plugin of resource ("" for the
// default) with count devices in a new directory, and waits until the
// plugin has registered.
func registered(t *testing.T, resource string, count int) (*harness, *fakeKubelet, *v1beta1.RegisterRequest) {
	t.Helper()
	dir := tempDir(t)
	k := startKubelet(t, dir)
	h := newHarness(t, dir, resource)
	h.plugin.SetCount(count)
	h.start()
	return h, k, h.awaitRegistration(k)
}

// awaitRegistration advances the fake clock until k accepts a registration.
func (h *harness) awaitRegistration(k *fakeKubelet) *v1beta1.RegisterRequest {
	h.t.Helper()
	var r *v1beta1.RegisterRequest
	testwait.For(h.t, waitLimit, "a registration", func() error {
		select {
		case r = <-k.reqs:
			return nil
		default:
			h.clk.Step(time.Second)
			return fmt.Errorf("%d attempts, none accepted", k.attempts.Load())
		}
	})
	return r
}

// waitFor polls cond, advancing the fake clock, until it holds.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	testwait.Until(h.t, waitLimit, what, func() bool {
		if cond() {
			return true
		}
		h.clk.Step(time.Second)
		return false
	})
}

func dialPlugin(t *testing.T, dir, endpoint string) v1beta1.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix:"+filepath.Join(dir, endpoint),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return v1beta1.NewDevicePluginClient(conn)
}

func listAndWatch(t *testing.T, c v1beta1.DevicePluginClient) grpc.ServerStreamingClient[v1beta1.ListAndWatchResponse] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	stream, err := c.ListAndWatch(ctx, &v1beta1.Empty{})
	if err != nil {
		t.Fatalf("ListAndWatch: %v", err)
	}
	return stream
}

// expectDevices receives one list and checks it is eni-0..eni-(n-1), all
// healthy.
func expectDevices(t *testing.T, stream grpc.ServerStreamingClient[v1beta1.ListAndWatchResponse], n int) {
	t.Helper()
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	var ids []string
	for _, d := range resp.GetDevices() {
		if d.GetHealth() != v1beta1.Healthy {
			t.Errorf("device %s is %q, want %q", d.GetID(), d.GetHealth(), v1beta1.Healthy)
		}
		ids = append(ids, d.GetID())
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("eni-%d", i)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("devices = %v, want %v", ids, want)
	}
}

func checkSocket(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("plugin socket: %v", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		t.Errorf("%s is %v, want a socket", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("%s has mode %#o, want 0600", path, perm)
	}
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestRegistersWithKubelet(t *testing.T) {
	h, _, r := registered(t, "", 0)
	if r.GetResourceName() != "aliyun/eni" {
		t.Errorf("resource name = %q, want aliyun/eni", r.GetResourceName())
	}
	if r.GetVersion() != v1beta1.Version {
		t.Errorf("version = %q, want %q", r.GetVersion(), v1beta1.Version)
	}
	if !endpointName.MatchString(r.GetEndpoint()) {
		t.Errorf("endpoint = %q, want <number>-eni.sock", r.GetEndpoint())
	}
	checkSocket(t, filepath.Join(h.dir, r.GetEndpoint()))
}

func TestListAndWatchFollowsSetCount(t *testing.T) {
	h, _, r := registered(t, "", 3)
	c := dialPlugin(t, h.dir, r.GetEndpoint())

	opts, err := c.GetDevicePluginOptions(context.Background(), &v1beta1.Empty{})
	if err != nil {
		t.Fatalf("GetDevicePluginOptions: %v", err)
	}
	if !proto.Equal(opts, &v1beta1.DevicePluginOptions{}) {
		t.Errorf("options = %v, want empty", opts)
	}
	stream := listAndWatch(t, c)
	expectDevices(t, stream, 3)
	h.plugin.SetCount(5)
	expectDevices(t, stream, 5)
	h.plugin.SetCount(1)
	expectDevices(t, stream, 1)
}

func TestShrinkToZeroAndGrowAgain(t *testing.T) {
	h, _, r := registered(t, "", 2)
	c := dialPlugin(t, h.dir, r.GetEndpoint())

	stream := listAndWatch(t, c)
	expectDevices(t, stream, 2)
	h.plugin.SetCount(0)
	expectDevices(t, stream, 0)
	// A stream opened while empty gets the empty list at once.
	expectDevices(t, listAndWatch(t, c), 0)
	h.plugin.SetCount(4)
	expectDevices(t, stream, 4)
}

func TestAllocateAnswersEveryContainer(t *testing.T) {
	h, _, r := registered(t, "", 3)
	c := dialPlugin(t, h.dir, r.GetEndpoint())
	ctx := context.Background()

	resp, err := c.Allocate(ctx, &v1beta1.AllocateRequest{ContainerRequests: []*v1beta1.ContainerAllocateRequest{
		{DevicesIds: []string{"eni-0"}}, {DevicesIds: []string{"eni-1", "eni-2"}},
	}})
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	if got := len(resp.GetContainerResponses()); got != 2 {
		t.Fatalf("Allocate: %d container responses, want 2", got)
	}
	for i, cr := range resp.GetContainerResponses() {
		if cr == nil || !proto.Equal(cr, &v1beta1.ContainerAllocateResponse{}) {
			t.Errorf("container response %d = %v, want empty", i, cr)
		}
	}
	if _, err := c.PreStartContainer(ctx, &v1beta1.PreStartContainerRequest{DevicesIds: []string{"eni-0"}}); err != nil {
		t.Errorf("PreStartContainer: %v", err)
	}
	pref, err := c.GetPreferredAllocation(ctx, &v1beta1.PreferredAllocationRequest{})
	if err != nil || len(pref.GetContainerResponses()) != 0 {
		t.Errorf("GetPreferredAllocation = %v, %v; want empty, nil", pref, err)
	}
}

func TestReregistersAfterKubeletRestart(t *testing.T) {
	h, k, first := registered(t, "", 2)
	dir, old := h.dir, first.GetEndpoint()

	// What kubelet does on restart: its socket goes, the new kubelet wipes
	// the plugin sockets and listens again.
	k.stop()
	if err := os.Remove(filepath.Join(dir, old)); err != nil {
		t.Fatal(err)
	}
	k2 := startKubelet(t, dir)
	r := h.awaitRegistration(k2)

	if r.GetResourceName() != "aliyun/eni" || r.GetVersion() != v1beta1.Version {
		t.Errorf("re-registration = %v", r)
	}
	if r.GetEndpoint() == old || !endpointName.MatchString(r.GetEndpoint()) {
		t.Errorf("new endpoint = %q, want a fresh <number>-eni.sock (old %q)", r.GetEndpoint(), old)
	}
	checkSocket(t, filepath.Join(dir, r.GetEndpoint()))
	expectDevices(t, listAndWatch(t, dialPlugin(t, dir, r.GetEndpoint())), 2)
	if got, want := dirEntries(t, dir), []string{r.GetEndpoint(), "kubelet.sock"}; !slices.Equal(got, want) {
		t.Errorf("dir holds %v, want %v", got, want)
	}
}

func TestReregistersWhenOnlyKubeletSocketIsRecreated(t *testing.T) {
	h, k, first := registered(t, "example.com/eni", 0)
	dir, old := h.dir, first.GetEndpoint()

	k.stop()
	k2 := startKubelet(t, dir)
	r := h.awaitRegistration(k2)

	if r.GetResourceName() != "example.com/eni" {
		t.Errorf("resource name = %q, want example.com/eni", r.GetResourceName())
	}
	checkSocket(t, filepath.Join(dir, r.GetEndpoint()))
	// The plugin may have kept its socket (if the old kubelet died before
	// its answer arrived, the plugin saw a failure and retried on the same
	// socket) or replaced it; either way it must leave no stale socket.
	if got, want := dirEntries(t, dir), []string{r.GetEndpoint(), "kubelet.sock"}; !slices.Equal(got, want) {
		t.Errorf("dir holds %v, want %v (old endpoint %s)", got, want, old)
	}
}

func TestWaitsForKubelet(t *testing.T) {
	dir := tempDir(t)
	h := newHarness(t, dir, "")
	h.start()
	// Let the plugin poll a few times with no kubelet around.
	for range 5 {
		h.clk.Step(time.Second)
	}
	k := startKubelet(t, dir)
	r := h.awaitRegistration(k)
	checkSocket(t, filepath.Join(dir, r.GetEndpoint()))
}

func TestRegistrationRetriedWithBackoff(t *testing.T) {
	dir := tempDir(t)
	k := startKubelet(t, dir)
	k.refuse.Store(3)
	h := newHarness(t, dir, "")
	begin := h.clk.Now()
	h.start()

	r := h.awaitRegistration(k)
	if got := k.attempts.Load(); got != 4 {
		t.Errorf("%d Register calls, want 4 (3 refused, then success)", got)
	}
	// Retries after 1 s, 2 s and 4 s: the success cannot come before 7 s.
	if waited := h.clk.Since(begin); waited < 7*time.Second {
		t.Errorf("registered after %v of fake time, want ≥ 7s of backoff", waited)
	}
	checkSocket(t, filepath.Join(dir, r.GetEndpoint()))
}

func TestRunStopsCleanly(t *testing.T) {
	h, _, r := registered(t, "", 1)
	dir, endpoint := h.dir, r.GetEndpoint()
	stream := listAndWatch(t, dialPlugin(t, dir, endpoint))
	expectDevices(t, stream, 1)

	if err := h.stop(); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(dir, endpoint)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("plugin socket after Run: %v, want it removed", err)
	}
	// The server hung up: the stream ends with a transport error, not by
	// running into the test's own deadline.
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("ListAndWatch after Run returned: %v, want code Unavailable", err)
	}
	h.waitFor("plugin goroutines to end", func() bool { return len(pluginGoroutines()) == 0 })
}

func TestRunRejectsTooLongDir(t *testing.T) {
	dir := filepath.Join(tempDir(t), strings.Repeat("d", 100))
	p := deviceplugin.New(deviceplugin.Options{Dir: dir, Clock: testingclock.NewFakeClock(time.Now())})
	if err := p.Run(context.Background()); err == nil {
		t.Fatal("Run accepted a directory too long for a unix socket path")
	}
}

// pluginGoroutines lists the goroutines running the package's code.
func pluginGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "terway/daemon/deviceplugin.") {
			found = append(found, g)
		}
	}
	return found
}
