package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// Schedule is a plan with every random choice fixed by a seed: what the
// engine runs, and what `--seed N --plan NAME` replays.
type Schedule struct {
	// Plan is the plan with its defaults filled in.
	Plan Plan  `json:"plan"`
	Seed int64 `json:"seed"`
	// Run is derived from the seed and names the run's faults.
	Run   string          `json:"run"`
	Steps []ScheduledStep `json:"steps"`
}

// StepRef names a step of a plan in schedules and results.
type StepRef struct {
	// Index is the step's 1-based position in the plan.
	Index int    `json:"index"`
	Name  string `json:"name"`
	Kind  Kind   `json:"kind"`
}

// ScheduledStep is a step with its choices made.
type ScheduledStep struct {
	StepRef
	// Start and End are offsets from the schedule's start.
	Start admin.Duration `json:"start"`
	End   admin.Duration `json:"end"`
	// Target is the step's target, the kind's default filled in.
	Target string `json:"target"`
	// Pick decides, when the step starts, which node, vSwitch, ENIs or
	// addresses a random target means among those the lab has then.
	Pick uint64 `json:"pick,omitempty"`
	// Params are the step's parameters with the kind's defaults.
	Params Params `json:"params"`
	// Faults are the fakecloud faults the step installs; Caller is set
	// when the step starts, from its target.
	Faults []admin.Fault `json:"faults,omitempty"`
	// Moments are when a process kind kills, from the schedule's start.
	Moments []admin.Duration `json:"moments,omitempty"`
}

// Duration is how long the step lasts.
func (s ScheduledStep) Duration() time.Duration { return s.End.D() - s.Start.D() }

// target is the parsed Target; a schedule holds valid targets only.
func (s ScheduledStep) target() target {
	t, _ := parseTarget(s.Target, s.Kind)
	return t
}

// Resolve validates plan and fixes its random choices with seed.
func Resolve(plan Plan, seed int64) (*Schedule, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	plan = plan.withDefaults()
	s := &Schedule{Plan: plan, Seed: seed, Run: fmt.Sprintf("%08x", uint32(rand.New(rand.NewPCG(uint64(seed), 0)).Uint64()))}
	for i, st := range plan.Steps {
		s.Steps = append(s.Steps, s.resolveStep(i, st))
	}
	return s, nil
}

// withDefaults fills in the workload's size and the invariants' limits.
func (p Plan) withDefaults() Plan {
	if p.Workload.Pods == 0 {
		p.Workload.Pods = DefaultPods
	}
	if p.Invariants.AuditClean == 0 {
		p.Invariants.AuditClean = admin.Duration(DefaultAuditClean)
	}
	if p.Invariants.PodsReady == 0 {
		p.Invariants.PodsReady = admin.Duration(DefaultPodsReady)
	}
	p.Steps = slices.Clone(p.Steps)
	return p
}

// resolveStep draws the step's choices from a generator of its own, so
// that adding a step to a plan does not change the others' choices.
func (s *Schedule) resolveStep(i int, st Step) ScheduledStep {
	rng := rand.New(rand.NewPCG(uint64(s.Seed), uint64(i+1)))
	t, _ := parseTarget(st.Target, st.Kind)
	out := ScheduledStep{StepRef: StepRef{Index: i + 1, Name: stepName(i, st), Kind: st.Kind}, Start: st.Start,
		End: admin.Duration(st.End()), Target: t.String(), Params: st.Params.withDefaults(st.Kind)}
	out.Params.Actions = slices.Clone(out.Params.Actions)
	if t.random() {
		out.Pick = rng.Uint64()
	}
	if kinds[st.Kind].class == ClassProcess {
		// Moments are whole milliseconds, for a readable schedule.
		ms := max(int64(st.Duration.D()/time.Millisecond), 1)
		for range out.Params.Kills {
			out.Moments = append(out.Moments, admin.Duration(st.Start.D()+time.Duration(rng.Int64N(ms))*time.Millisecond))
		}
		slices.Sort(out.Moments)
	}
	for j, f := range stepFaults(out) {
		f.Name = fmt.Sprintf("chaos-%s-%d-%d", s.Run, out.Index, j+1)
		f.Seed = int64(rng.Uint64()>>1) | 1
		out.Faults = append(out.Faults, f)
	}
	return out
}

// stepFaults are the fakecloud faults of a cloud step, unnamed.
func stepFaults(s ScheduledStep) []admin.Fault {
	p := s.Params
	prob := p.Percent / 100
	var out []admin.Fault
	perAction := func(kind string) {
		for _, a := range p.Actions {
			f := admin.Fault{Kind: kind, Probability: prob, Code: p.Code}
			if a != AllActions {
				f.Action = a
			}
			if kind == admin.FaultLostResponse {
				f.Lost = p.Lost
			}
			out = append(out, f)
		}
	}
	switch s.Kind {
	case CloudErrors:
		perAction(admin.FaultError)
	case LostAnswers:
		perAction(admin.FaultLostResponse)
	case Consistency:
		out = append(out, admin.Fault{Kind: admin.FaultConsistency, Action: "CreateNetworkInterface", Latency: p.Delay})
	case MetadataOutage:
		// The metadata service answers a failure with its HTML page for
		// the status: a code would mean nothing there.
		f := admin.Fault{Kind: admin.FaultError, Service: admin.ServiceMetadata, Probability: prob, Status: 500}
		if p.Mode == "hang" {
			f = admin.Fault{Kind: admin.FaultPause, Service: admin.ServiceMetadata, Probability: prob, Step: admin.StepBefore}
		}
		out = append(out, f)
	case MetadataStale:
		out = append(out, admin.Fault{Kind: admin.FaultStale, Service: admin.ServiceMetadata, Probability: prob})
	}
	return out
}

// FaultsEnd is when the schedule's last step ends, from its start.
func (s *Schedule) FaultsEnd() time.Duration {
	var end time.Duration
	for _, st := range s.Steps {
		end = max(end, st.End.D())
	}
	return end
}

// WriteJSON writes the schedule as indented JSON.
func (s *Schedule) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// about says how the rollout starts and what it does besides.
func (w Workload) about() string {
	var s string
	if w.ColdPools {
		s += " on cold pools"
	}
	if w.Restarts > 0 {
		s += fmt.Sprintf(", %d rolling restart(s) while the faults last", w.Restarts)
	}
	if w.EIP {
		s += ", every pod with an EIP"
	}
	return s
}

// WriteText writes the schedule as a readable table.
func (s *Schedule) WriteText(w io.Writer) error {
	p := s.Plan
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "plan %s, seed %d (run %s): %s\n", p.Name, s.Seed, s.Run, p.Description)
	fmt.Fprintf(tw, "workload: a rollout of %d pods from 0s%s; faults end at %s; then pods Ready within %s, audit clean within %s\n",
		p.Workload.Pods, p.Workload.about(), s.FaultsEnd(), p.Invariants.PodsReady.D(), p.Invariants.AuditClean.D())
	fmt.Fprintln(tw, "STEP\tSTART\tEND\tKIND\tTARGET\tWHAT")
	for _, st := range s.Steps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", st.Name, st.Start.D(), st.End.D(), st.Kind, st.targetText(), st.describe())
	}
	return tw.Flush()
}

func (s ScheduledStep) targetText() string {
	if s.Pick != 0 {
		return fmt.Sprintf("%s (pick %08x)", s.Target, uint32(s.Pick))
	}
	return s.Target
}

// describe says what the step does, in a few words.
func (s ScheduledStep) describe() string {
	p := s.Params
	var what string
	switch s.Kind {
	case CloudErrors:
		what = fmt.Sprintf("%g%% %s on %s", p.Percent, p.Code, strings.Join(p.Actions, ", "))
	case LostAnswers:
		what = fmt.Sprintf("%g%% answers lost (%s) on %s", p.Percent, p.Lost, strings.Join(p.Actions, ", "))
	case SlowAsync:
		what = fmt.Sprintf("attach and detach take %s", p.Delay.D())
	case ThrottleStorm:
		what = fmt.Sprintf("budget %d per window on %s", p.Budget, strings.Join(p.Actions, ", "))
	case VSwitchExhaustion:
		what = fmt.Sprintf("drained to %d free, refilled at the end", p.Leave)
	case MetadataOutage:
		what = fmt.Sprintf("metadata %s on %g%% of requests", p.Mode, p.Percent)
	case MetadataStale:
		what = fmt.Sprintf("stale metadata on %g%% of requests", p.Percent)
	case Consistency:
		what = fmt.Sprintf("new ENIs hidden from Describe for %s", p.Delay.D())
	case KillTerwayd, RestartContainerd, RestartKubelet, RestartAPIServer:
		what = "kills at " + joinDurations(s.Moments)
		if p.Downtime != 0 {
			what += fmt.Sprintf(", down %s each", p.Downtime.D())
		}
	case ENIDetachOOB, ENIDeleteOOB, IPUnassignOOB:
		what = fmt.Sprintf("%d out of band at the start", p.Count)
	default:
		what = s.Kind.About()
	}
	if n := len(s.Faults); n == 1 {
		what += fmt.Sprintf(" [fault %s]", s.Faults[0].Name)
	} else if n > 1 {
		what += fmt.Sprintf(" [faults %s-{1..%d}]", strings.TrimSuffix(s.Faults[0].Name, "-1"), n)
	}
	return what
}

func joinDurations(ds []admin.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.D().String()
	}
	return strings.Join(parts, ", ")
}
