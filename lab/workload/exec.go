package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// ExecResult is what a command run in a pod printed.
type ExecResult struct {
	Stdout, Stderr string
	// Duration is from the exec request to the command's end.
	Duration time.Duration
}

// Executor runs commands in pods through the API server and the kubelet,
// as kubectl exec does: over WebSocket, falling back to SPDY when the
// server cannot upgrade to it.
type Executor struct {
	config *rest.Config
	rest   rest.Interface
}

// NewExecutor returns an Executor for the API server of config.
func NewExecutor(config *rest.Config) (*Executor, error) {
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("executor: client for %s: %w", config.Host, err)
	}
	return &Executor{config: config, rest: kube.CoreV1().RESTClient()}, nil
}

// Exec runs cmd in the pod's container (the first one when container is
// empty) without stdin or a TTY, and returns its output. ctx bounds the
// whole exchange: when it ends the stream is closed and Exec returns what
// was read so far with ctx's error (the process in the pod may run on).
// A command that exits non-zero yields an error whose text has the exit
// code, output still returned.
func (e *Executor) Exec(ctx context.Context, namespace, pod, container string, cmd []string) (ExecResult, error) {
	start := time.Now()
	req := e.rest.Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container, Command: cmd, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	exec, err := e.executor(req)
	if err != nil {
		return ExecResult{}, fmt.Errorf("exec in %s/%s: %w", namespace, pod, err)
	}
	var stdout, stderr bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	res := ExecResult{Stdout: stdout.String(), Stderr: stderr.String(), Duration: time.Since(start)}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return res, fmt.Errorf("exec %q in %s/%s: %w", cmd, namespace, pod, err)
	}
	return res, nil
}

func (e *Executor) executor(req *rest.Request) (remotecommand.Executor, error) {
	spdy, err := remotecommand.NewSPDYExecutor(e.config, "POST", req.URL())
	if err != nil {
		return nil, fmt.Errorf("spdy executor: %w", err)
	}
	// WebSocket needs GET (RFC 6455 4.1).
	ws, err := remotecommand.NewWebSocketExecutor(e.config, "GET", req.URL().String())
	if err != nil {
		return nil, fmt.Errorf("websocket executor: %w", err)
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}
