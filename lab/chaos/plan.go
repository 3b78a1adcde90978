package chaos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// Plan is a named fault plan: the workload it runs, how long the
// invariants may take to hold again, and the steps.
type Plan struct {
	// Name is [a-z0-9-]; it names the plan's report directory.
	Name        string     `json:"name"`
	Description string     `json:"description,omitempty"`
	Workload    Workload   `json:"workload,omitzero"`
	Invariants  Invariants `json:"invariants,omitzero"`
	Steps       []Step     `json:"steps"`
}

// Workload is what the plan runs while its faults happen: a rollout of
// Pods pods, started when the schedule starts.
type Workload struct {
	// Pods is the rollout's size; 0 means DefaultPods.
	Pods int `json:"pods,omitempty"`
	// ColdPools starts the rollout on cold pools: before it, an operator
	// deletes (through the engine's Operator) every secondary ENI of the
	// lab's nodes that holds no pod's address, and the run waits until the
	// audit is clean again (the daemons dropped them). Allocation-path
	// faults then meet the calls a cold node makes (CreateNetworkInterface,
	// AttachNetworkInterface, AssignPrivateIpAddresses) instead of a warm
	// pool that answers the rollout without calling the cloud at all.
	ColdPools bool `json:"coldPools,omitempty"`
	// Restarts is how many rolling restarts of the pods (every pod
	// replaced, as kubectl rollout restart does) the run starts inside the
	// faults' window, evenly spaced; 0 is none.
	Restarts int `json:"restarts,omitempty"`
	// EIP gives every pod of the rollout an EIP of its own (annotation
	// k8s.aliyun.com/pod-with-eip; the runner turns enable_eip_pool on on
	// every node for the run), so that EIP calls meet the faults and the
	// audit's EIP checks judge the end state. Not in VPC mode.
	EIP bool `json:"eip,omitempty"`
}

// DefaultPods is a plan's rollout size when it states none.
const DefaultPods = 30

// Invariants are the verdict's time limits, counted from the end of the
// last fault.
type Invariants struct {
	// AuditClean is how long the four-source audit may take to come out
	// clean (0: DefaultAuditClean).
	AuditClean admin.Duration `json:"auditClean,omitempty"`
	// PodsReady is how long every pod of the workload may take to be
	// Ready (0: DefaultPodsReady).
	PodsReady admin.Duration `json:"podsReady,omitempty"`
}

// Invariant time limits when a plan states none.
const (
	DefaultAuditClean = 2 * time.Minute
	DefaultPodsReady  = 5 * time.Minute
)

// Step is one fault: Kind applied at Start (from the schedule's start)
// for Duration to Target, with Params. Steps may overlap, except two
// steps of a kind that saves and restores state (slow-async,
// throttle-storm, vswitch-exhaustion, node-stop-start).
type Step struct {
	// Name is [a-z0-9-], unique in the plan; "" means "<index>-<kind>".
	Name     string         `json:"name,omitempty"`
	Start    admin.Duration `json:"start"`
	Duration admin.Duration `json:"duration"`
	Kind     Kind           `json:"kind"`
	// Target says what the fault hits; "" is the kind's default (see
	// the Target* scopes; `terway-lab chaos --list` shows them per kind).
	Target string `json:"target,omitempty"`
	Params Params `json:"params,omitzero"`
}

// End is when the step is undone, from the schedule's start.
func (s Step) End() time.Duration { return s.Start.D() + s.Duration.D() }

// Params are the kinds' parameters; each kind reads some of them (and a
// plan setting one its kind does not read is refused). Zero means the
// kind's default.
type Params struct {
	// Actions are API actions ("*" alone: all) for cloud-errors,
	// lost-answers and throttle-storm; default the allocation path:
	// CreateNetworkInterface, AttachNetworkInterface,
	// AssignPrivateIpAddresses.
	Actions []string `json:"actions,omitempty"`
	// Percent of the matching calls hit, (0,100]: cloud-errors (30),
	// lost-answers (20), metadata-outage and metadata-stale (100).
	Percent float64 `json:"percent,omitempty"`
	// Code is the error code answered (default InternalError).
	Code string `json:"code,omitempty"`
	// Lost is how lost-answers loses an answer: "error" (default) or
	// "timeout" (no answer until the client gives up).
	Lost string `json:"lost,omitempty"`
	// Delay is slow-async's attach and detach time (30s) and how long
	// consistency hides a new ENI (5s), in fakecloud's world time.
	Delay admin.Duration `json:"delay,omitempty"`
	// Budget is throttle-storm's calls per throttle window (1).
	Budget int `json:"budget,omitempty"`
	// Leave is how many free addresses vswitch-exhaustion leaves (0).
	Leave int `json:"leave,omitempty"`
	// Mode is metadata-outage's "5xx" (default) or "hang".
	Mode string `json:"mode,omitempty"`
	// Kills is how many random moments a process kind kills at
	// (kill-terwayd 3, the restarts 1).
	Kills int `json:"kills,omitempty"`
	// Downtime is how long a restarted component stays down (10s).
	Downtime admin.Duration `json:"downtime,omitempty"`
	// Count is how many ENIs or addresses an out-of-band kind hits (1).
	Count int `json:"count,omitempty"`
}

// set names the parameters that are not zero.
func (p Params) set() []string {
	var out []string
	for name, isSet := range map[string]bool{
		"actions": len(p.Actions) > 0, "percent": p.Percent != 0, "code": p.Code != "", "lost": p.Lost != "",
		"delay": p.Delay != 0, "budget": p.Budget != 0, "leave": p.Leave != 0, "mode": p.Mode != "",
		"kills": p.Kills != 0, "downtime": p.Downtime != 0, "count": p.Count != 0,
	} {
		if isSet {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// ParsePlan reads a plan from JSON. Unknown fields are refused, so that
// a typo does not silently leave a default in place, and the plan is
// validated.
func ParsePlan(data []byte) (Plan, error) {
	var p Plan
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("parse plan: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return p, errors.New("parse plan: data after the plan's JSON object")
	}
	return p, p.Validate()
}

// LoadPlan reads a plan file (JSON).
func LoadPlan(path string) (Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Plan{}, fmt.Errorf("read plan: %w", err)
	}
	p, err := ParsePlan(data)
	if err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Validate checks the plan and says what is wrong, naming the step.
func (p Plan) Validate() error {
	if !nameRE.MatchString(p.Name) {
		return fmt.Errorf("plan name %q: want [a-z0-9-], starting with a letter or digit", p.Name)
	}
	if p.Workload.Pods < 0 {
		return fmt.Errorf("plan %s: workload pods %d must not be negative", p.Name, p.Workload.Pods)
	}
	if p.Workload.Restarts < 0 {
		return fmt.Errorf("plan %s: workload restarts %d must not be negative", p.Name, p.Workload.Restarts)
	}
	if len(p.Steps) == 0 {
		return fmt.Errorf("plan %s: no steps", p.Name)
	}
	names := map[string]bool{}
	for i, s := range p.Steps {
		if err := s.validate(); err != nil {
			return fmt.Errorf("plan %s: step %d (%s): %w", p.Name, i+1, s.Kind, err)
		}
		name := stepName(i, s)
		if names[name] {
			return fmt.Errorf("plan %s: step %d: name %q used twice", p.Name, i+1, name)
		}
		names[name] = true
	}
	return p.checkOverlaps()
}

// stepName is the step's name or its default.
func stepName(i int, s Step) string {
	if s.Name != "" {
		return s.Name
	}
	return fmt.Sprintf("%d-%s", i+1, s.Kind)
}

func (s Step) validate() error {
	spec, ok := kinds[s.Kind]
	if !ok {
		return fmt.Errorf("unknown kind %q (kinds: %v)", s.Kind, Kinds())
	}
	if s.Name != "" && !nameRE.MatchString(s.Name) {
		return fmt.Errorf("name %q: want [a-z0-9-]", s.Name)
	}
	if s.Start < 0 || s.Duration <= 0 {
		return fmt.Errorf("start %s, duration %s: want start >= 0 and duration > 0", s.Start.D(), s.Duration.D())
	}
	if _, err := parseTarget(s.Target, s.Kind); err != nil {
		return err
	}
	for _, name := range s.Params.set() {
		if !slices.Contains(spec.params, name) {
			return fmt.Errorf("param %q does not apply (%s reads: %v)", name, s.Kind, spec.params)
		}
	}
	return s.Params.validate()
}
