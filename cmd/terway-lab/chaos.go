package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/chaos/report"
	"github.com/terway-sim/terway/lab/chaos/timeline"
	"github.com/terway-sim/terway/lab/cluster"
	"github.com/terway-sim/terway/lab/prereq"
	"github.com/terway-sim/terway/lab/workload"
)

// chaosOptions are the flags of chaos.
type chaosOptions struct {
	plan    string
	seed    int64
	seedSet bool
	out     string
	dryRun  bool
	list    bool
	asJSON  bool
}

func newChaosCommand(g *globals) *cobra.Command {
	o := &chaosOptions{}
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Apply a named, seeded fault plan to the running lab during a rollout, undo it, prove it fired",
		Long: `chaos resolves a fault plan (a name from --list, or a JSON plan file) with a
seed into a schedule — faults, targets, offsets, fakecloud's fault seeds —
and applies it to the running lab while a rollout of the plan's pods runs:
each step at its offset, undone at its end, every fault removed at the end
also on failure or interruption. Then every step must have fired (fakecloud's
accounting shows the injected outcomes; process and node steps say what they
did), the pods must be Ready and the audit clean within the plan's limits.
The report (JSON, Markdown, an SVG timeline sampled each second, and a
summary over the runs in --out) says which invariants held, and why those
whose facts were not collected were skipped.

Every run prints its seed and plan first; --seed N --plan NAME replays the
same schedule (outcomes can differ with timing). --dry-run prints the
schedule and touches nothing (no lab needed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.seedSet = cmd.Flags().Changed("seed")
			return runChaos(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.plan, "plan", "", "plan name (see --list) or JSON plan file")
	f.Int64Var(&o.seed, "seed", 0, "seed of the schedule (default: a random one, printed)")
	f.StringVar(&o.out, "out", "", "directory for the run's report, schedule and result (default <repo>/.lab/chaos)")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the resolved schedule and stop; needs no lab")
	f.BoolVar(&o.list, "list", false, "list the catalogue of plans and the fault kinds")
	f.BoolVar(&o.asJSON, "json", false, "with --dry-run, print the schedule as JSON")
	return cmd
}

func runChaos(ctx context.Context, g *globals, o *chaosOptions) error {
	if o.list {
		return writeCatalogue(g.stdout)
	}
	p, err := loadPlan(o.plan)
	if err != nil {
		return err
	}
	if !o.seedSet {
		o.seed = rand.Int64()
	}
	// JSON goes alone to stdout, so the first line then goes to stderr.
	head := g.stdout
	if o.dryRun && o.asJSON {
		head = g.stderr
	}
	printf(head, "chaos: plan %s, seed %d (replay: terway-lab chaos --plan %s --seed %d)\n", p.Name, o.seed, o.plan, o.seed)
	s, err := chaos.Resolve(p, o.seed)
	if err != nil {
		return err
	}
	if o.dryRun {
		if o.asJSON {
			return s.WriteJSON(g.stdout)
		}
		return s.WriteText(g.stdout)
	}
	if err := s.WriteText(g.stdout); err != nil {
		return err
	}
	st, err := cluster.ReadState(g.dir())
	if err != nil {
		return err
	}
	return chaosOnLab(ctx, g, st, s, o.out)
}

// loadPlan reads --plan: a catalogue name, or a file when it names one.
func loadPlan(arg string) (chaos.Plan, error) {
	if arg == "" {
		return chaos.Plan{}, errors.New("--plan NAME or FILE is required (terway-lab chaos --list shows the plans)")
	}
	if strings.ContainsRune(arg, os.PathSeparator) || strings.HasSuffix(arg, ".json") {
		return chaos.LoadPlan(arg)
	}
	return chaos.Lookup(arg)
}

// writeCatalogue lists the plans, then the kinds a plan file may use.
func writeCatalogue(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLAN\tKINDS\tPODS\tREADY\tAUDIT\tDESCRIPTION")
	for _, p := range chaos.Catalogue() {
		var ks []string
		for _, s := range p.Steps {
			ks = append(ks, string(s.Kind))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", p.Name, strings.Join(ks, ","), p.Workload.Pods,
			p.Invariants.PodsReady.D(), p.Invariants.AuditClean.D(), p.Description)
	}
	fmt.Fprintln(tw, "\nKIND\tCLASS\tTARGETS (default first)\tPARAMS\tWHAT")
	for _, k := range chaos.Kinds() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k, k.Class(), k.Targets(), strings.Join(k.Params(), ","), k.About())
	}
	return tw.Flush()
}

// labEngine wires the chaos engine to a running lab: fakecloud's admin
// client is its Cloud, the supervisor's control socket its Lab (node
// lifecycle and component kills), and an ECS client with the lab's
// operator AccessKey, not the daemons', its Operator.
func labEngine(st *cluster.State, progress io.Writer) (*chaos.Engine, error) {
	op, err := chaos.NewSDKOperator(chaos.OperatorOptions{Endpoint: st.FakecloudURL, Region: st.Region,
		AccessKeyID: st.OperatorAccessKeyID, AccessKeySecret: st.OperatorAccessKeySecret})
	if err != nil {
		return nil, err
	}
	lab, err := cluster.DialControl(st.Dir)
	if err != nil {
		return nil, err
	}
	e := &chaos.Engine{Cloud: &admin.Client{URL: st.FakecloudURL, Token: st.AdminToken}, Lab: lab, Operator: op,
		Progress: progress}
	for _, n := range st.Nodes {
		e.Nodes = append(e.Nodes, chaos.Node{Name: n.Name, InstanceID: n.InstanceID})
	}
	return e, nil
}

var _ chaos.Lab = (*cluster.Control)(nil)

// chaosNamespace holds the chaos workload.
const chaosNamespace = "terway-chaos"

// chaosOnLab runs the schedule on the lab during a rollout of the plan's
// pods, sampling a timeline from before the rollout to after the checks,
// then judges the invariants and writes the schedule, result and report.
func chaosOnLab(ctx context.Context, g *globals, st *cluster.State, s *chaos.Schedule, out string) error {
	eng, err := labEngine(st, g.stdout)
	if err != nil {
		return err
	}
	kube, err := kubeClient(st)
	if err != nil {
		return err
	}
	w, err := workload.New(kube, workload.Spec{Namespace: chaosNamespace, Replicas: int32(s.Plan.Workload.Pods),
		ExclusiveENI: st.Mode == mode.ENIOnly, Spread: true})
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		_ = w.Delete(dctx)
	}()
	sampler, err := timeline.Start(ctx, timeline.Config{Calls: eng.Cloud, Kube: kube, Namespace: chaosNamespace})
	if err != nil {
		return err
	}
	defer sampler.Stop()
	printf(g.stdout, "chaos: rollout of %d pods\n", s.Plan.Workload.Pods)
	if err := w.Deploy(ctx); err != nil {
		return err
	}
	res, runErr := eng.Run(ctx, s)
	if res == nil {
		return runErr
	}
	addBands(sampler, res)
	f, notes, checkErr := collectFacts(ctx, g, st, kube, s, w, sampler)
	f.Timeline = sampler.Stop()
	run := chaosRun(s, res, runErr, f, notes)
	return errors.Join(runErr, checkErr, verdict(g, run), writeChaos(g, s, res, run, out))
}

// writeChaos prints the result, writes the report with report.WriteRun
// under out/<plan>-<seed>, and schedule.json and result.json beside it.
func writeChaos(g *globals, s *chaos.Schedule, res *chaos.Result, run *report.Run, out string) error {
	if err := res.WriteText(g.stdout); err != nil {
		return err
	}
	if out == "" {
		// .lab is git-ignored; outside the source tree, here will do.
		repo, err := prereq.FindRepo(".")
		if err != nil {
			repo = "."
		}
		out = filepath.Join(repo, ".lab", "chaos")
	}
	dir, err := report.WriteRun(out, run)
	if err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer) error{"schedule.json": s.WriteJSON, "result.json": res.WriteJSON} {
		if err := writeFile(filepath.Join(dir, name), write); err != nil {
			return err
		}
	}
	printf(g.stdout, "chaos: report, schedule and result written to %s\n", dir)
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = write(f)
	return errors.Join(err, f.Close())
}
