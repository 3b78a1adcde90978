package cni

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/terway-sim/terway/cni/datapath"
)

// plugin runs the CNI verbs. Production uses newPlugin's values; tests
// give each plugin its own output, node namespace and ipvlan probe, so
// they can run in parallel.
type plugin struct {
	stdout io.Writer
	// stderr receives the log when the config names no log_file.
	stderr io.Writer
	// hostNetNS is the node's network namespace; "" is the caller's own,
	// which is the node's when a runtime runs the plugin.
	hostNetNS string
	// probeIPVlan is datapath.ProbeIPVlan.
	probeIPVlan func(podNetNS string) error
	// reap deletes the host veths a DEL retired (datapath.Reap). The
	// binary hands it to a detached child, so the DEL answers without
	// waiting for the kernel; in-process callers reap synchronously.
	reap func(hostNetNS string) error
}

func newPlugin(stdout, stderr io.Writer) *plugin {
	return &plugin{stdout: stdout, stderr: stderr, probeIPVlan: datapath.ProbeIPVlan, reap: reapNow}
}

func reapNow(hostNetNS string) error {
	_, err := datapath.Reap(hostNetNS)
	return err
}

// funcs are the verbs for skel.
func (p *plugin) funcs() skel.CNIFuncs {
	return skel.CNIFuncs{
		Add:    p.guard("ADD", p.cmdAdd),
		Del:    p.guard("DEL", p.cmdDel),
		Check:  p.guard("CHECK", p.cmdCheck),
		GC:     p.guard("GC", p.cmdGC),
		Status: p.guard("STATUS", p.cmdStatus),
	}
}

// guard turns a panic into a CNI error: the runtime must get JSON on
// stdout, never a Go stack trace.
func (p *plugin) guard(verb string, fn func(*skel.CmdArgs) error) func(*skel.CmdArgs) error {
	return func(args *skel.CmdArgs) (err error) {
		defer func() {
			if r := recover(); r != nil {
				_, _ = fmt.Fprintf(p.stderr, "terway %s: internal error: %v\n%s", verb, r, debug.Stack())
				err = types.NewError(types.ErrInternal, fmt.Sprintf("terway %s: internal error: %v", verb, r), "")
			}
		}()
		return fn(args)
	}
}

// invocation is one verb's parsed input and its resources.
type invocation struct {
	p     *plugin
	args  *skel.CmdArgs
	conf  *Config
	pod   PodID
	log   *slog.Logger
	state stateStore
	close func()
}

// begin parses the config and CNI_ARGS and opens the log.
func (p *plugin) begin(args *skel.CmdArgs, verb string) (*invocation, error) {
	conf, err := ParseConfig(args.StdinData)
	if err != nil {
		return nil, err
	}
	pod, err := parsePodID(args.Args, args.ContainerID)
	if err != nil {
		return nil, err
	}
	log, closeLog, err := p.openLog(conf)
	if err != nil {
		return nil, err
	}
	attrs := []any{"verb", verb, "pid", os.Getpid()}
	if args.ContainerID != "" {
		attrs = append(attrs, "containerID", args.ContainerID, "ifname", args.IfName)
	}
	if pod.Known() {
		attrs = append(attrs, "pod", pod.String())
	}
	log = log.With(attrs...)
	if len(conf.Ignored) > 0 {
		log.Info("network config keys accepted but not implemented, ignored", "keys", conf.Ignored)
	}
	if !conf.Net.IPAM.IsEmpty() {
		log.Info("network config key ipam ignored: terwayd allocates", "ipamType", conf.Net.IPAM.Type)
	}
	return &invocation{p: p, args: args, conf: conf, pod: pod, log: log, state: stateStore{dir: conf.StateDir}, close: closeLog}, nil
}

// openLog logs to log_file when set, else to stderr (never stdout, which
// carries the result); debug lowers the level to Debug.
func (p *plugin) openLog(conf *Config) (*slog.Logger, func(), error) {
	level := slog.LevelInfo
	if conf.Debug {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	if conf.LogFile == "" {
		return slog.New(slog.NewTextHandler(p.stderr, opts)), func() {}, nil
	}
	if err := os.MkdirAll(filepath.Dir(conf.LogFile), 0o700); err != nil {
		return nil, nil, types.NewError(types.ErrIOFailure, fmt.Sprintf("log_file %s: %v", conf.LogFile, err), "")
	}
	f, err := os.OpenFile(conf.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, types.NewError(types.ErrIOFailure, fmt.Sprintf("log_file %s: %v", conf.LogFile, err), "")
	}
	return slog.New(slog.NewTextHandler(f, opts)), func() { _ = f.Close() }, nil
}

func (inv *invocation) end() { inv.close() }

// lockContainer takes the container's lock: code 11 when another
// invocation holds it too long, 5 when the state dir is unusable.
func (inv *invocation) lockContainer(ctx context.Context) (*fileLock, error) {
	l, err := lockContainer(ctx, inv.state.dir, inv.args.ContainerID)
	if err != nil {
		code := types.ErrIOFailure
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			code = types.ErrTryAgainLater // another invocation holds it
		}
		return nil, types.NewError(code, fmt.Sprintf("container %s: %v", inv.args.ContainerID, err), "")
	}
	return l, nil
}

// teardown undoes spec under the node-wide datapath lock.
func (inv *invocation) teardown(ctx context.Context, spec *datapath.Spec) error {
	return withDatapathLock(ctx, inv.state.dir, func() error { return datapath.Teardown(spec) })
}

// teardownDeferred is teardown for DEL: the host veth is retired, not
// deleted, and reaped once the DEL has answered (see datapath.Reap).
func (inv *invocation) teardownDeferred(ctx context.Context, spec *datapath.Spec) error {
	return withDatapathLock(ctx, inv.state.dir, func() error { return datapath.TeardownDeferred(spec) })
}
