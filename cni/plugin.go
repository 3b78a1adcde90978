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
	"time"

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

// funcs are the verbs for skel, each with its deadline and its use of
// the container's lock.
func (p *plugin) funcs() skel.CNIFuncs {
	return skel.CNIFuncs{
		Add:    p.verb("ADD", Timeout, noLock, p.cmdAdd),
		Del:    p.verb("DEL", Timeout, removeLock, p.cmdDel),
		Check:  p.verb("CHECK", Timeout, keepLock, p.cmdCheck),
		GC:     p.verb("GC", Timeout, noLock, p.cmdGC),
		Status: p.verb("STATUS", statusTimeout, noLock, p.cmdStatus),
	}
}

// verb is what skel runs for one verb: fn with the invocation that
// begin opens, under guard, closed when fn returns.
func (p *plugin) verb(name string, timeout time.Duration, use lockUse,
	fn func(context.Context, *invocation) error) func(*skel.CmdArgs) error {
	return p.guard(name, func(args *skel.CmdArgs) error {
		inv, ctx, err := p.begin(args, name, timeout, use)
		if err != nil {
			return err
		}
		defer inv.end()
		return fn(ctx, inv)
	})
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
	// begun is when the invocation started, for the log; phases how long
	// ADD spent in each part, for its last log line (the lab's reports
	// break ADD latency down by them).
	begun  time.Time
	phases addPhases
	// lock is the container's lock once taken, to be released by end
	// as lockUse says.
	lock    *fileLock
	lockUse lockUse
	cancel  context.CancelFunc
	close   func()
}

// lockUse is what a verb does with its container's lock.
type lockUse int

const (
	// noLock: the verb serves no one container (STATUS, GC), or takes the
	// lock itself after its own checks (ADD).
	noLock lockUse = iota
	// keepLock: end releases the lock and leaves its file for the
	// container's next verb.
	keepLock
	// removeLock: end deletes the lock file too; DEL is a container's
	// last verb.
	removeLock
)

// begin opens an invocation of verb: it parses the config and CNI_ARGS,
// opens the log, starts the context that bounds the verb to timeout and,
// unless use is noLock, takes the container's lock. The caller defers
// end, which gives all of these back.
func (p *plugin) begin(args *skel.CmdArgs, verb string, timeout time.Duration, use lockUse) (*invocation, context.Context, error) {
	begun := time.Now()
	inv, err := p.open(args, verb)
	if err != nil {
		return nil, nil, err
	}
	inv.begun = begun
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	inv.cancel = cancel
	if use != noLock {
		if err := inv.lockContainer(ctx, use); err != nil {
			inv.end()
			return nil, nil, err
		}
	}
	return inv, ctx, nil
}

// open parses the config and CNI_ARGS and opens the log.
func (p *plugin) open(args *skel.CmdArgs, verb string) (*invocation, error) {
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

// end releases the container's lock, ends the context and closes the
// log, in that order.
func (inv *invocation) end() {
	switch {
	case inv.lock == nil:
	case inv.lockUse == removeLock:
		inv.lock.unlockAndRemove()
	default:
		inv.lock.unlock()
	}
	inv.cancel()
	inv.close()
}

// lockContainer takes the container's lock until end, which releases it
// as use says: code 11 when another invocation holds it too long, 5 when
// the state dir is unusable.
func (inv *invocation) lockContainer(ctx context.Context, use lockUse) error {
	l, err := lockContainer(ctx, inv.state.dir, inv.args.ContainerID)
	if err != nil {
		code := types.ErrIOFailure
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			code = types.ErrTryAgainLater // another invocation holds it
		}
		return types.NewError(code, fmt.Sprintf("container %s: %v", inv.args.ContainerID, err), "")
	}
	inv.lock, inv.lockUse = l, use
	return nil
}

// teardown undoes spec under the datapath locks it needs.
func (inv *invocation) teardown(ctx context.Context, spec *datapath.Spec) error {
	return withDatapathLock(ctx, inv.state.dir, spec, true, func() error { return datapath.Teardown(spec) })
}

// teardownDeferred is teardown for DEL: the host veth is retired, not
// deleted, and reaped once the DEL has answered (see datapath.Reap).
func (inv *invocation) teardownDeferred(ctx context.Context, spec *datapath.Spec) error {
	return withDatapathLock(ctx, inv.state.dir, spec, true, func() error { return datapath.TeardownDeferred(spec) })
}
