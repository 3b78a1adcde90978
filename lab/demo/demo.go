// Package demo runs the lab's demonstration on a running lab: a web
// workload sized to the mode's capacity, started on a cold pool, scaled to
// zero and started again on the warm pool, with connectivity checks
// (pod to pod on one node and across nodes, pod to Service), the leak
// audit, and a report of what it cost: pod ready latency, CNI ADD latency
// as the plugin saw it, cloud API calls per pod by action, ENIs and
// addresses in use against pods, throttled calls and memory.
package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/cluster"
	"github.com/terway-sim/terway/lab/workload"
)

// Options configure Run.
type Options struct {
	State *cluster.State
	Kube  kubernetes.Interface
	Rest  *rest.Config
	// Replicas is the workload size; 0 sizes it to the mode (see
	// DefaultReplicas).
	Replicas int
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
}

// DefaultReplicas sizes the workload: ENIOnly holds one pod per secondary
// ENI, so all of them; the other modes run ten pods a node, which the
// lab's warm pool (max_pool_size 10) can hold again after scaling to zero.
func DefaultReplicas(st *cluster.State) int {
	n := 0
	for _, node := range st.Nodes {
		switch st.Mode {
		case mode.ENIOnly:
			n += node.MaxPods - 1
		default:
			n += 10
		}
	}
	return n
}

// demoNamespace holds the workload; it is deleted at the end.
const demoNamespace = "terway-demo"

// Run runs the demo and returns its report. The workload is deleted
// again whatever happens.
func Run(ctx context.Context, o Options) (*Report, error) {
	r := &Report{Mode: o.State.Mode, Nodes: len(o.State.Nodes), UpSeconds: o.State.UpSeconds}
	if o.Replicas == 0 {
		o.Replicas = DefaultReplicas(o.State)
	}
	r.Replicas = o.Replicas
	d := &run{o: o, r: r, admin: &admin.Client{URL: o.State.FakecloudURL, Token: o.State.AdminToken}}
	err := d.steps(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if d.w != nil {
		if derr := d.w.Delete(cctx); derr != nil && err == nil {
			err = derr
		}
	}
	return r, err
}

// run is one demo in progress.
type run struct {
	o     Options
	r     *Report
	admin *admin.Client
	w     *workload.Workload
}

func (d *run) step(format string, a ...any) {
	if d.o.Progress != nil {
		fmt.Fprintf(d.o.Progress, "demo: "+format+"\n", a...)
	}
}

func (d *run) steps(ctx context.Context) error {
	var err error
	if err = d.admin.ResetCalls(ctx); err != nil {
		return err
	}
	d.w, err = workload.New(d.o.Kube, workload.Spec{Namespace: demoNamespace, Replicas: int32(d.o.Replicas),
		ExclusiveENI: d.o.State.Mode == mode.ENIOnly, Spread: true})
	if err != nil {
		return err
	}
	coldMark := cniLogMarks(d.o.State)
	d.step("cold pool: starting %d pods", d.o.Replicas)
	if d.r.Cold, err = d.rollout(ctx, func() error { return d.w.Deploy(ctx) }); err != nil {
		return fmt.Errorf("cold rollout: %w", err)
	}
	if err := d.inventory(ctx); err != nil {
		return err
	}
	d.step("connectivity: pod to pod (same node, across nodes), pod to Service")
	if err := d.connectivity(ctx); err != nil {
		return err
	}
	d.step("scaling to 0")
	if err := d.w.Scale(ctx, 0); err != nil {
		return err
	}
	if err := d.w.WaitGone(ctx); err != nil {
		return err
	}
	d.r.CNIAddCold = workload.Summarize(cniAddLatencies(d.o.State, coldMark)["total"])
	warmMark := cniLogMarks(d.o.State)
	d.step("warm pool: starting %d pods again", d.o.Replicas)
	if d.r.Warm, err = d.rollout(ctx, func() error { return d.w.Scale(ctx, int32(d.o.Replicas)) }); err != nil {
		return fmt.Errorf("warm rollout: %w", err)
	}
	warmADD := cniAddLatencies(d.o.State, warmMark)
	d.r.CNIAddWarm = workload.Summarize(warmADD["total"])
	d.r.CNIAddWarmPhases = map[string]workload.Summary{}
	for _, k := range addPhases[1:] {
		d.r.CNIAddWarmPhases[k] = workload.Summarize(warmADD[k])
	}
	if err := d.calls(ctx); err != nil {
		return err
	}
	d.r.Memory = cluster.MeasureMemory(d.o.State)
	d.step("deleting the workload")
	if err := d.w.Delete(ctx); err != nil {
		return err
	}
	d.w = nil
	d.step("audit")
	rep, err := audit.RunUntilClean(ctx, d.o.State.AuditInput(d.o.Kube), time.Minute)
	if err != nil {
		return err
	}
	d.r.Audit = rep
	return nil
}

// rollout starts pods with start and measures creation → Ready as the
// watch sees it.
func (d *run) rollout(ctx context.Context, start func() error) (workload.Summary, error) {
	rec, err := workload.RecordReadyLatency(ctx, d.o.Kube, demoNamespace, d.w.Selector())
	if err != nil {
		return workload.Summary{}, err
	}
	defer rec.Stop()
	if err := start(); err != nil {
		return workload.Summary{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := rec.Wait(wctx, d.o.Replicas); err != nil {
		return workload.Summary{}, err
	}
	return workload.Summarize(rec.Latencies()), nil
}

// connectivity runs every check from the workload's pods.
func (d *run) connectivity(ctx context.Context) error {
	pods, err := d.w.WaitReady(ctx, d.o.Replicas)
	if err != nil {
		return err
	}
	svc, err := d.w.ServiceObject(ctx)
	if err != nil {
		return err
	}
	ex, err := workload.NewExecutor(d.o.Rest)
	if err != nil {
		return err
	}
	d.r.Connectivity = workload.Prober{Runner: ex}.CheckAll(ctx, pods, svc)
	return nil
}
