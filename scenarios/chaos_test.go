package scenarios

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/chaos/runner"
	"github.com/terway-sim/terway/lab/prereq"
)

// chaosSeed is the seed every chaos spec resolves its plan with, so that a
// failing spec replays with `terway-lab chaos --plan P --seed 1`.
const chaosSeed = 1

// chaosSpecTimeout bounds one plan: settling and cold pools (up to 8 min),
// the faults (up to 4 min), the pods' and the audit's limits (up to 10 min)
// and the checks between them.
const chaosSpecTimeout = 30 * time.Minute

// The chaos suite: one spec per plan of the catalogue, each run through
// lab/chaos/runner on the lab of env with a fixed seed, labelled "chaos",
// with the plan's fault classes and kinds. The tree is built from the
// catalogue alone: env is read only inside the specs.
var _ = Describe("chaos", Serial, Label("chaos"), func() {
	for _, p := range chaos.Catalogue() {
		It(p.Name+": "+p.Description, Label(chaosLabels(p)...), func(ctx SpecContext) {
			runChaosSpec(ctx, p)
		}, SpecTimeout(chaosSpecTimeout))
	}
})

// chaosLabels are the plan's fault classes and kinds, each once.
func chaosLabels(p chaos.Plan) []string {
	var out []string
	for _, s := range p.Steps {
		for _, l := range []string{string(s.Kind.Class()), string(s.Kind)} {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	return out
}

// runChaosSpec runs plan p on the lab and fails on any violation or a
// step that never fired, printing the seed, the plan, the timeline up to
// each violation and the audit.
func runChaosSpec(ctx SpecContext, p chaos.Plan) {
	env.RequireCloud()
	env.RequireLab()
	s, err := chaos.Resolve(p, chaosSeed)
	Expect(err).NotTo(HaveOccurred())
	// The lab as it is now: an earlier plan may have released a node.
	st := env.LabState()
	eng, err := runner.LabEngine(st, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	cfg, err := runner.LabConfig(st, env.Kube, env.Exec, eng, s, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	Expect(runner.Check(cfg, s)).To(Succeed(), "plan %s cannot run on this lab", p.Name)
	By(fmt.Sprintf("plan %s, seed %d (replay: terway-lab chaos --plan %s --seed %d)", p.Name, chaosSeed, p.Name, chaosSeed))
	var sched strings.Builder
	Expect(s.WriteText(&sched)).To(Succeed())
	AddReportEntry("schedule", sched.String())
	o, err := runner.Run(ctx, cfg, s)
	Expect(err).NotTo(HaveOccurred(), "plan %s, seed %d did not start", p.Name, chaosSeed)
	var res strings.Builder
	Expect(o.Result.WriteText(&res)).To(Succeed())
	AddReportEntry("result", res.String())
	if dir, err := o.WriteReport(chaosOut()); err != nil {
		AddReportEntry("report not written", err.Error())
	} else {
		AddReportEntry("report", dir)
	}
	var why strings.Builder
	Expect(o.WriteViolations(&why)).To(Succeed())
	if o.Run.Error != "" {
		fmt.Fprintf(&why, "the run did not complete: %s\n", o.Run.Error)
	}
	Expect(o.Passed()).To(BeTrue(), "plan %s, seed %d: %v\n%s\n%s", p.Name, chaosSeed, o.Err(), res.String(), why.String())
}

// chaosOut is where the specs write their reports: $TERWAY_CHAOS_OUT, or
// <repo>/.lab/chaos as terway-lab chaos does.
func chaosOut() string {
	if d := os.Getenv("TERWAY_CHAOS_OUT"); d != "" {
		return d
	}
	repo, err := prereq.FindRepo(".")
	if err != nil {
		return filepath.Join(os.TempDir(), "terway-chaos")
	}
	return filepath.Join(repo, ".lab", "chaos")
}
