package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"
)

// fakeController records the operations it is asked for and answers
// what the test set.
type fakeController struct {
	mu    sync.Mutex
	calls []string
	err   error
	// block makes operations wait for their context's end; started and
	// ended tell when.
	block   bool
	started chan struct{}
	ended   chan error
}

func (f *fakeController) do(ctx context.Context, call string) error {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	err, block := f.err, f.block
	f.mu.Unlock()
	if block {
		close(f.started)
		<-ctx.Done()
		f.ended <- ctx.Err()
		return ctx.Err()
	}
	return err
}

func (f *fakeController) StopNode(ctx context.Context, n string) error  { return f.do(ctx, "stop "+n) }
func (f *fakeController) StartNode(ctx context.Context, n string) error { return f.do(ctx, "start "+n) }
func (f *fakeController) ReleaseNode(ctx context.Context, n string) error {
	return f.do(ctx, "release "+n)
}
func (f *fakeController) RemoveNode(ctx context.Context, n string) error {
	return f.do(ctx, "remove "+n)
}
func (f *fakeController) AddNode(ctx context.Context) (NodeState, error) {
	return NodeState{Name: "lab-3", InstanceID: "i-3", Status: NodeRunning}, f.do(ctx, "add")
}
func (f *fakeController) Kill(ctx context.Context, c, n string, d time.Duration) error {
	return f.do(ctx, fmt.Sprintf("kill %s %q %s", c, n, d))
}

func (f *fakeController) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// serveFake serves f on a control socket in a new lab directory and
// returns a client dialled from that directory.
func serveFake(t *testing.T, f *fakeController) *Control {
	t.Helper()
	dir := t.TempDir()
	l, err := listenControl(ControlSocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: controlHandler(f, slog.New(slog.NewTextHandler(io.Discard, nil)))}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	c, err := DialControl(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestControlOperations(t *testing.T) {
	f := &fakeController{}
	c := serveFake(t, f)
	ctx := context.Background()
	for _, op := range []func() error{
		func() error { return c.StopNode(ctx, "lab-1") },
		func() error { return c.StartNode(ctx, "lab-1") },
		func() error { return c.ReleaseNode(ctx, "lab-2") },
		func() error { return c.RemoveNode(ctx, "lab-3") },
		func() error { return c.Kill(ctx, ComponentKubelet, "lab-1", 1500*time.Millisecond) },
		func() error { return c.Kill(ctx, ComponentAPIServer, "", 0) },
	} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	n, err := c.AddNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "lab-3" || n.InstanceID != "i-3" || !n.Running() {
		t.Errorf("added %+v, want lab-3 on i-3, running", n)
	}
	want := []string{"stop lab-1", "start lab-1", "release lab-2", "remove lab-3",
		`kill kubelet "lab-1" 1.5s`, `kill kube-apiserver "" 0s`, "add"}
	if got := f.took(); !reflect.DeepEqual(got, want) {
		t.Errorf("supervisor was asked\n%q\nwant\n%q", got, want)
	}
}

// A refusal comes back with its message and its kind, by status.
func TestControlErrors(t *testing.T) {
	f := &fakeController{}
	c := serveFake(t, f)
	ctx := context.Background()
	for _, kind := range []error{ErrUnknownNode, ErrNodeState, ErrBadRequest, errors.New("fabric on fire")} {
		f.mu.Lock()
		f.err = fmt.Errorf("node lab-9: %w", kind)
		f.mu.Unlock()
		err := c.StopNode(ctx, "lab-9")
		var ce *ControlError
		if !errors.As(err, &ce) || ce.Message != "node lab-9: "+kind.Error() {
			t.Errorf("%v: got %v, want a ControlError with the supervisor's message", kind, err)
			continue
		}
		if wrapped := kindOf(ce.Status); wrapped != nil && !errors.Is(err, kind) {
			t.Errorf("%v: %v does not unwrap to it", kind, err)
		}
		if ce.Status != statusOf(kind) {
			t.Errorf("%v: status %d, want %d", kind, ce.Status, statusOf(kind))
		}
	}
	if statusOf(errors.New("x")) != http.StatusInternalServerError {
		t.Error("an unclassified error must be a 500")
	}
}

// Malformed requests are refused before the supervisor is asked.
func TestControlBadRequests(t *testing.T) {
	f := &fakeController{}
	c := serveFake(t, f)
	ctx := context.Background()
	if err := c.post(ctx, "/v1/nodes/lab-1/explode", nil, nil); !errors.Is(err, ErrBadRequest) {
		t.Errorf("unknown node operation: %v, want ErrBadRequest", err)
	}
	if err := c.post(ctx, "/v1/kill", map[string]string{"component": "kubelet", "downtime": "soon"}, nil); !errors.Is(err, ErrBadRequest) {
		t.Errorf("bad downtime: %v, want ErrBadRequest", err)
	}
	if err := c.StopNode(ctx, ""); !errors.Is(err, ErrBadRequest) {
		t.Errorf("no node name: %v, want ErrBadRequest", err)
	}
	if got := f.took(); len(got) != 0 {
		t.Errorf("supervisor was asked %q", got)
	}
}

// The client's context bounds the operation in the supervisor.
func TestControlCancel(t *testing.T) {
	f := &fakeController{block: true, started: make(chan struct{}), ended: make(chan error, 1)}
	c := serveFake(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Kill(ctx, ComponentTerwayd, "lab-1", 0) }()
	<-f.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("client: %v, want context.Canceled", err)
	}
	select {
	case err := <-f.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("supervisor's operation ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the supervisor's operation did not end with the client's request")
	}
}

func TestControlSocket(t *testing.T) {
	dir := t.TempDir()
	if _, err := DialControl(dir); err == nil {
		t.Error("DialControl without a socket succeeded")
	}
	l, err := listenControl(ControlSocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Stat(ControlSocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("control socket mode %v, want a socket with 0600", fi.Mode())
	}
	if (&State{Dir: dir}).ControlSocket() != ControlSocketPath(dir) {
		t.Error("State.ControlSocket differs from ControlSocketPath")
	}
}
