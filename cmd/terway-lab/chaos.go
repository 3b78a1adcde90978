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

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/chaos/runner"
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
and runs it with lab/chaos/runner: it waits until the lab has settled
(terway Ready on every node, the previous workload gone), empties the
pools first when the plan starts on cold pools, and applies the schedule
while a rollout of the plan's pods runs: each step at its offset, undone at
its end, every fault removed at the end also on failure or interruption.
Then every step must have fired (fakecloud's accounting shows the injected
outcomes; process and node steps say what they did), the pods must be Ready
within the plan's limit with addresses that fakecloud's world confirms, the
connectivity matrix must pass, every daemon restart must have a fault to
explain it, and the audit must come out clean within the plan's limit.
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

// chaosOnLab runs the schedule on the lab through the chaos runner
// (lab/chaos/runner: settle, rollout, faults, facts, audit, verdict),
// then prints each violation once, the engine's result, and where the
// report went.
func chaosOnLab(ctx context.Context, g *globals, st *cluster.State, s *chaos.Schedule, out string) error {
	eng, err := runner.LabEngine(st, g.stdout)
	if err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	exec, err := workload.NewExecutor(rc)
	if err != nil {
		return err
	}
	cfg, err := runner.LabConfig(st, kube, exec, eng, s, g.stdout)
	if err != nil {
		return err
	}
	o, err := runner.Run(ctx, cfg, s)
	if err != nil {
		return err
	}
	return errors.Join(writeChaos(g, o, out), o.Err())
}

// writeChaos prints the violations (each once, explained) and the
// engine's result, and writes the report under out (default
// <repo>/.lab/chaos).
func writeChaos(g *globals, o *runner.Outcome, out string) error {
	if err := o.WriteViolations(g.stdout); err != nil {
		return err
	}
	if err := o.Result.WriteText(g.stdout); err != nil {
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
	dir, err := o.WriteReport(out)
	if err != nil {
		return err
	}
	printf(g.stdout, "chaos: report, schedule and result written to %s\n", dir)
	return nil
}
