package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/terway-sim/terway/lab/chaos"
)

// The control socket is how terway-lab commands and the chaos engine
// reach a running supervisor: HTTP/1.1 with JSON bodies over the unix
// socket control.sock in the lab's directory, mode 0600 (root only, as
// the state file). Every request is a POST:
//
//	/v1/nodes                 add a node; answers {"node": NodeState}
//	/v1/nodes/NAME/stop       power the node off
//	/v1/nodes/NAME/start      power it on
//	/v1/nodes/NAME/release    release its instance
//	/v1/nodes/NAME/remove     cordon, drain, release
//	/v1/kill                  {"component": C, "node": N, "downtime": "10s"}
//
// Success is 200 with a JSON object; failure is {"error": "..."} with 400
// (bad request), 404 (no such node), 409 (the node or component is not
// in a state for it) or 500. An operation runs until done or until the
// client goes away: the request's context bounds it.

// Components Kill names. Their names live in lab/chaos, whose Lab.Kill
// this serves (lab/chaos stays free of the emulator, so the home is
// there, not here).
const (
	ComponentTerwayd    = chaos.ComponentTerwayd
	ComponentContainerd = chaos.ComponentContainerd
	ComponentKubelet    = chaos.ComponentKubelet
	ComponentAPIServer  = chaos.ComponentAPIServer
	// componentKubeProxy is started and stopped with its node only.
	componentKubeProxy = "kube-proxy"
)

// Errors of control operations; Control's errors wrap them too.
var (
	// ErrUnknownNode means the lab has no node of that name.
	ErrUnknownNode = errors.New("no such node")
	// ErrNodeState means the node or component is not in a state for the
	// operation (stopping a stopped node, killing a killed kubelet).
	ErrNodeState = errors.New("not in a state for this")
	// ErrBadRequest means the request itself is wrong.
	ErrBadRequest = errors.New("bad request")
)

// ControlSocketPath is the control socket of the lab in dir.
func ControlSocketPath(dir string) string { return filepath.Join(dir, "control.sock") }

// controller is what the control socket serves: the Supervisor, or a
// test's fake.
type controller interface {
	StopNode(ctx context.Context, name string) error
	StartNode(ctx context.Context, name string) error
	ReleaseNode(ctx context.Context, name string) error
	RemoveNode(ctx context.Context, name string) error
	AddNode(ctx context.Context) (NodeState, error)
	Kill(ctx context.Context, component, node string, downtime time.Duration) error
}

var _ controller = (*Supervisor)(nil)

// killRequest is the body of /v1/kill.
type killRequest struct {
	Component string `json:"component"`
	Node      string `json:"node,omitempty"`
	// Downtime is a Go duration ("10s").
	Downtime string `json:"downtime,omitempty"`
}

// addAnswer is the answer of /v1/nodes.
type addAnswer struct {
	Node NodeState `json:"node"`
}

type errorAnswer struct {
	Error string `json:"error"`
}

// controlHandler serves c.
func controlHandler(c controller, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	nodeOps := map[string]func(context.Context, string) error{
		"stop": c.StopNode, "start": c.StartNode, "release": c.ReleaseNode, "remove": c.RemoveNode,
	}
	mux.HandleFunc("POST /v1/nodes/{name}/{op}", func(w http.ResponseWriter, r *http.Request) {
		name, op := r.PathValue("name"), r.PathValue("op")
		f, ok := nodeOps[op]
		if !ok {
			answer(w, log, nil, fmt.Errorf("node operation %q: want stop, start, release or remove: %w", op, ErrBadRequest))
			return
		}
		log.Info("control", "op", op, "node", name)
		answer(w, log, struct{}{}, f(r.Context(), name))
	})
	mux.HandleFunc("POST /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		log.Info("control", "op", "add")
		n, err := c.AddNode(r.Context())
		answer(w, log, addAnswer{Node: n}, err)
	})
	mux.HandleFunc("POST /v1/kill", func(w http.ResponseWriter, r *http.Request) {
		var req killRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			answer(w, log, nil, fmt.Errorf("kill request: %v: %w", err, ErrBadRequest))
			return
		}
		var down time.Duration
		if req.Downtime != "" {
			var err error
			if down, err = time.ParseDuration(req.Downtime); err != nil {
				answer(w, log, nil, fmt.Errorf("downtime: %v: %w", err, ErrBadRequest))
				return
			}
		}
		log.Info("control", "op", "kill", "component", req.Component, "node", req.Node, "downtime", down)
		answer(w, log, struct{}{}, c.Kill(r.Context(), req.Component, req.Node, down))
	})
	return mux
}

// answer writes v, or err with its status.
func answer(w http.ResponseWriter, log *slog.Logger, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		log.Warn("control operation failed", "err", err)
		w.WriteHeader(statusOf(err))
		v = errorAnswer{Error: err.Error()}
	}
	_ = json.NewEncoder(w).Encode(v)
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnknownNode):
		return http.StatusNotFound
	case errors.Is(err, ErrNodeState):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// kindOf is the error a status stands for.
func kindOf(status int) error {
	switch status {
	case http.StatusBadRequest:
		return ErrBadRequest
	case http.StatusNotFound:
		return ErrUnknownNode
	case http.StatusConflict:
		return ErrNodeState
	}
	return nil
}

// listenControl listens on the control socket at path, readable and
// writable by root only.
func listenControl(path string) (net.Listener, error) {
	_ = os.Remove(path) // a crashed supervisor's
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on the control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("restrict the control socket: %w", err)
	}
	return l, nil
}

// serveControl serves the supervisor's operations on its control socket.
func (s *Supervisor) serveControl() error {
	l, err := listenControl(ControlSocketPath(s.cfg.Dir))
	if err != nil {
		return err
	}
	s.control = &http.Server{Handler: controlHandler(s, s.log.With("part", "control")),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.control.Serve(l) }()
	return nil
}

// Control is a client of a running lab's supervisor, through its control
// socket: node lifecycle and component kills. It is the chaos engine's
// Lab.
type Control struct {
	socket string
	http   *http.Client
}

// DialControl returns the client of the supervisor of the lab in dir. It
// fails when the lab has no control socket (not up, or not yet ready).
func DialControl(dir string) (*Control, error) {
	path := ControlSocketPath(dir)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("the lab in %s has no control socket (is it up and ready?): %w", dir, err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return nil, fmt.Errorf("%s is not a socket", path)
	}
	var d net.Dialer
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConns: 2,
	}
	return &Control{socket: path, http: &http.Client{Transport: tr}}, nil
}

// StopNode powers node off (see Supervisor.StopNode).
func (c *Control) StopNode(ctx context.Context, node string) error {
	return c.nodeOp(ctx, node, "stop")
}

// StartNode powers a stopped node on.
func (c *Control) StartNode(ctx context.Context, node string) error {
	return c.nodeOp(ctx, node, "start")
}

// ReleaseNode releases node's instance and deletes its Node object.
func (c *Control) ReleaseNode(ctx context.Context, node string) error {
	return c.nodeOp(ctx, node, "release")
}

// RemoveNode cordons and drains node, then releases it.
func (c *Control) RemoveNode(ctx context.Context, node string) error {
	return c.nodeOp(ctx, node, "remove")
}

// AddNode adds a node and returns it once it is Ready with terway.
func (c *Control) AddNode(ctx context.Context) (NodeState, error) {
	var a addAnswer
	err := c.post(ctx, "/v1/nodes", nil, &a)
	return a.Node, err
}

// Kill kills component on node ("" for kube-apiserver); the supervisor
// starts containerd, the kubelet and kube-apiserver again after downtime,
// the kubelet restarts terwayd.
func (c *Control) Kill(ctx context.Context, component, node string, downtime time.Duration) error {
	return c.post(ctx, "/v1/kill", killRequest{Component: component, Node: node, Downtime: downtime.String()}, nil)
}

func (c *Control) nodeOp(ctx context.Context, node, op string) error {
	if node == "" {
		return fmt.Errorf("%s: a node name is needed: %w", op, ErrBadRequest)
	}
	return c.post(ctx, "/v1/nodes/"+url.PathEscape(node)+"/"+op, nil, nil)
}

// post sends body (JSON, or none) and decodes the answer into out.
func (c *Control) post(ctx context.Context, path string, body, out any) error {
	var rd io.Reader = http.NoBody
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://lab"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("lab control %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("lab control %s: read answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e errorAnswer
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(data))
		}
		return &ControlError{Status: resp.StatusCode, Message: e.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("lab control %s: parse answer: %w", path, err)
	}
	return nil
}

// ControlError is an operation the supervisor refused or failed. It
// unwraps to ErrBadRequest, ErrUnknownNode or ErrNodeState by status.
type ControlError struct {
	Status  int
	Message string
}

func (e *ControlError) Error() string { return "lab supervisor: " + e.Message }

// Unwrap is the kind of failure the status says.
func (e *ControlError) Unwrap() error { return kindOf(e.Status) }
