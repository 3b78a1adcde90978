package chaos

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// allocationActions are the calls a rollout makes: the default actions of
// the cloud kinds that take actions.
var allocationActions = []string{"CreateNetworkInterface", "AttachNetworkInterface", "AssignPrivateIpAddresses"}

// AllActions, alone in Params.Actions, selects every action.
const AllActions = "*"

var actionRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// Limits on parameters, so that a typo (kills: 3000) fails validation
// rather than a lab.
const (
	maxKills = 100
	maxCount = 100
)

func (p Params) validate() error {
	if err := validateActions(p.Actions); err != nil {
		return err
	}
	if p.Percent < 0 || p.Percent > 100 || math.IsNaN(p.Percent) {
		return fmt.Errorf("percent %g: want (0,100]", p.Percent)
	}
	if p.Lost != "" && p.Lost != "error" && p.Lost != "timeout" {
		return fmt.Errorf("lost %q: want \"error\" or \"timeout\"", p.Lost)
	}
	if p.Mode != "" && p.Mode != "5xx" && p.Mode != "hang" {
		return fmt.Errorf("mode %q: want \"5xx\" or \"hang\"", p.Mode)
	}
	if p.Delay < 0 || p.Downtime < 0 {
		return errors.New("delay and downtime must not be negative")
	}
	if p.Budget < 0 || p.Leave < 0 {
		return errors.New("budget and leave must not be negative")
	}
	if p.Kills < 0 || p.Kills > maxKills {
		return fmt.Errorf("kills %d: want 1..%d", p.Kills, maxKills)
	}
	if p.Count < 0 || p.Count > maxCount {
		return fmt.Errorf("count %d: want 1..%d", p.Count, maxCount)
	}
	return nil
}

func validateActions(actions []string) error {
	for i, a := range actions {
		if a == AllActions {
			if len(actions) > 1 {
				return fmt.Errorf("actions %v: %q stands alone", actions, AllActions)
			}
			continue
		}
		if !actionRE.MatchString(a) {
			return fmt.Errorf("action %q: want an API action name such as AttachNetworkInterface", a)
		}
		if slices.Contains(actions[:i], a) {
			return fmt.Errorf("action %q listed twice", a)
		}
	}
	return nil
}

// withDefaults fills in the defaults of kind k's parameters.
func (p Params) withDefaults(k Kind) Params {
	spec := kinds[k]
	reads := func(name string) bool { return slices.Contains(spec.params, name) }
	if reads("actions") && len(p.Actions) == 0 {
		p.Actions = slices.Clone(allocationActions)
	}
	if reads("percent") && p.Percent == 0 {
		p.Percent = map[Kind]float64{CloudErrors: 30, LostAnswers: 20}[k]
		if p.Percent == 0 {
			p.Percent = 100
		}
	}
	if reads("code") && p.Code == "" {
		p.Code = "InternalError"
	}
	if reads("lost") && p.Lost == "" {
		p.Lost = "error"
	}
	if reads("delay") && p.Delay == 0 {
		p.Delay = admin.Duration(map[Kind]time.Duration{SlowAsync: 30 * time.Second, Consistency: 5 * time.Second}[k])
	}
	if reads("budget") && p.Budget == 0 {
		p.Budget = 1
	}
	if reads("mode") && p.Mode == "" {
		p.Mode = "5xx"
	}
	if reads("kills") && p.Kills == 0 {
		p.Kills = 1
		if k == KillTerwayd {
			p.Kills = 3
		}
	}
	if reads("downtime") && p.Downtime == 0 {
		p.Downtime = admin.Duration(10 * time.Second)
	}
	if reads("count") && p.Count == 0 {
		p.Count = 1
	}
	return p
}

// checkOverlaps refuses two overlapping steps of an exclusive kind: the
// second would save the first one's changed state and restore that.
func (p Plan) checkOverlaps() error {
	for i, a := range p.Steps {
		for j := i + 1; j < len(p.Steps); j++ {
			b := p.Steps[j]
			if a.Kind != b.Kind || !kinds[a.Kind].exclusive {
				continue
			}
			if a.Start.D() < b.End() && b.Start.D() < a.End() {
				return fmt.Errorf("plan %s: steps %d and %d (%s) overlap; %s saves and restores state, so its steps must not",
					p.Name, i+1, j+1, a.Kind, a.Kind)
			}
		}
	}
	return nil
}
