package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/chaos/timeline"
	"github.com/terway-sim/terway/lab/workload"
)

// Workload is the plan's pods as the runner drives them;
// *workload.Workload is one.
type Workload interface {
	// Deploy starts the rollout.
	Deploy(ctx context.Context) error
	// Restart starts a rolling restart of every pod.
	Restart(ctx context.Context, at time.Time) error
	// WaitReady waits until exactly n pods are Ready and returns them.
	WaitReady(ctx context.Context, n int) ([]corev1.Pod, error)
	// ServiceObject reads the workload's Service.
	ServiceObject(ctx context.Context) (*corev1.Service, error)
	// Delete deletes the workload and waits until it is gone; a workload
	// that is not there is no error.
	Delete(ctx context.Context) error
}

var _ Workload = (*workload.Workload)(nil)

// Prober runs the connectivity matrix; workload.Prober is one.
type Prober interface {
	CheckAll(ctx context.Context, pods []corev1.Pod, svc *corev1.Service) []workload.Check
}

var _ Prober = workload.Prober{}

// Auditor audits the lab until it is clean or within has passed, and
// returns the last report.
type Auditor func(ctx context.Context, within time.Duration) (*audit.Report, error)

// Config is what a run uses of the lab.
type Config struct {
	// Engine applies the faults; its Cloud is also what the timeline
	// counts calls with and what the addresses are checked against, and
	// its Operator deletes the idle ENIs of cold pools. Its Nodes are the
	// lab's nodes.
	Engine *chaos.Engine
	// Kube is the API server: settling, the timeline, cold pools.
	Kube kubernetes.Interface
	// Namespace holds the workload (and nothing else).
	Namespace string
	// Workload is the plan's rollout, of the plan's size, in Namespace.
	Workload Workload
	// Prober runs the connectivity matrix; nil leaves it out (a note
	// says so).
	Prober Prober
	// Audit audits the lab; nil leaves the audit out, and refuses plans
	// on cold pools.
	Audit Auditor
	// VPC says pods take addresses from the nodes' podCIDRs, not from
	// ENIs: no check against fakecloud's ENIs, no cold pools.
	VPC bool
	// Progress receives one line per stage; nil discards them.
	Progress io.Writer
	// SettleTimeout bounds settling (0: DefaultSettleTimeout);
	// ColdTimeout the wait for a clean audit after the idle ENIs went
	// (0: the plan's audit limit, and at least DefaultColdTimeout).
	SettleTimeout, ColdTimeout time.Duration
	// Interval is the timeline's (0: timeline.DefaultInterval); PollEvery
	// how often settling looks (0: a second).
	Interval, PollEvery time.Duration
}

// Defaults of Config.
const (
	DefaultSettleTimeout = 5 * time.Minute
	// DefaultColdTimeout bounds the wait for the daemons to drop their
	// deleted idle ENIs: two heal rounds (pool_heal_period) in ENIMultiIP,
	// the pool sync (pool_check_period, two minutes) in the other modes.
	DefaultColdTimeout = 3 * time.Minute
	// cleanupTimeout bounds deleting the workload when a run ends early.
	cleanupTimeout = 3 * time.Minute
)

// check refuses a schedule the configuration cannot run, before the
// lab is touched.
func (c *Config) check(s *chaos.Schedule) error {
	switch {
	case c.Engine == nil || c.Engine.Cloud == nil:
		return errors.New("chaos runner: the engine with fakecloud's admin client (Engine.Cloud) is required")
	case c.Kube == nil || c.Workload == nil || c.Namespace == "":
		return errors.New("chaos runner: Kube, Namespace and Workload are required")
	}
	if err := c.Engine.Check(s); err != nil {
		return err
	}
	if s.Plan.Workload.EIP && c.VPC {
		return fmt.Errorf("plan %s gives pods EIPs: VPC mode's pod addresses are on no ENI", s.Plan.Name)
	}
	if s.Plan.Workload.ColdPools {
		switch {
		case c.VPC:
			return fmt.Errorf("plan %s starts on cold pools: VPC mode has no ENI pools", s.Plan.Name)
		case c.Engine.Operator == nil:
			return fmt.Errorf("plan %s starts on cold pools: an operator's ECS client (Engine.Operator) deletes the idle ENIs", s.Plan.Name)
		case c.Audit == nil:
			return fmt.Errorf("plan %s starts on cold pools: the audit (Config.Audit) says when the daemons have let the idle ENIs go", s.Plan.Name)
		}
	}
	return nil
}

// Check says whether cfg can run s, touching nothing: the engine's
// clients and nodes, and what cold pools need.
func Check(cfg Config, s *chaos.Schedule) error { return cfg.check(s) }

func (c *Config) progress(format string, a ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "chaos: "+format+"\n", a...)
	}
}

// Run runs s on the lab of cfg (see the package documentation for the
// stages) and judges it. The error is for a run that could not start (a
// client missing, a lab that did not settle, a rollout refused): then
// there is no outcome. Once the faults ran, everything that went wrong is
// in the outcome's verdict.
func Run(ctx context.Context, cfg Config, s *chaos.Schedule) (*Outcome, error) {
	if err := cfg.check(s); err != nil {
		return nil, err
	}
	if s.Plan.Workload.EIP {
		undo, err := enableEIPs(ctx, &cfg)
		defer undo()
		if err != nil {
			return nil, err
		}
	}
	if err := settle(ctx, &cfg); err != nil {
		return nil, err
	}
	var notes []string
	if s.Plan.Workload.ColdPools {
		n, err := coldPools(ctx, &cfg, s)
		if err != nil {
			return nil, err
		}
		notes = append(notes, n)
	}
	smp, err := timeline.Start(ctx, timeline.Config{Calls: cfg.Engine.Cloud, Kube: cfg.Kube, Namespace: cfg.Namespace,
		Interval: cfg.Interval})
	if err != nil {
		return nil, err
	}
	defer smp.Stop()
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = cfg.Workload.Delete(dctx) // gone already unless the run ended early
	}()
	cfg.progress("rollout of %d pods", s.Plan.Workload.Pods)
	if err := cfg.Workload.Deploy(ctx); err != nil {
		return nil, fmt.Errorf("chaos runner: rollout: %w", err)
	}
	restarts := startRestarts(ctx, &cfg, s)
	res, runErr := cfg.Engine.Run(ctx, s)
	notes = append(notes, restarts()...)
	if res == nil {
		return nil, runErr
	}
	addBands(smp, res)
	f, more, errs := collectFacts(ctx, &cfg, s, smp)
	f.Timeline = smp.Stop()
	run := buildRun(s, res, f, append(notes, more...), errors.Join(append([]error{runErr}, errs...)...))
	return &Outcome{Schedule: s, Result: res, Run: run}, nil
}

// startRestarts starts the plan's rolling restarts, evenly spaced over
// its faults' window from now (the engine starts right after); the
// function returned waits for them and says what they did.
func startRestarts(ctx context.Context, cfg *Config, s *chaos.Schedule) (wait func() []string) {
	n := s.Plan.Workload.Restarts
	if n == 0 || len(s.Steps) == 0 {
		return func() []string { return nil }
	}
	from, to := s.Steps[0].Start.D(), s.Steps[0].End.D()
	for _, st := range s.Steps {
		from, to = min(from, st.Start.D()), max(to, st.End.D())
	}
	start := time.Now()
	done := make(chan []string, 1)
	go func() {
		var notes []string
		defer func() { done <- notes }()
		for i := 1; i <= n; i++ {
			at := from + (to-from)*time.Duration(i)/time.Duration(n+1)
			select {
			case <-ctx.Done():
				notes = append(notes, fmt.Sprintf("rolling restart %d of %d not started: %v", i, n, ctx.Err()))
				return
			case <-time.After(time.Until(start.Add(at))):
			}
			err := cfg.Workload.Restart(ctx, time.Now())
			note := fmt.Sprintf("rolling restart %d of %d at +%s", i, n, time.Since(start).Round(100*time.Millisecond))
			if err != nil {
				note += ": " + err.Error()
			}
			cfg.progress("%s", note)
			notes = append(notes, note)
		}
	}()
	return func() []string { return <-done }
}

// addBands hands the timeline the faults the engine applied.
func addBands(smp *timeline.Sampler, res *chaos.Result) {
	for _, f := range faultBands(res) {
		smp.AddBand(f.Band)
	}
}
