package fakecloud

import (
	"fmt"
	"net/netip"
)

// A drain holds free IPv4 addresses of a vSwitch for the emulator (an
// admin operation a chaos plan uses to exhaust a vSwitch): they are given
// to no ENI and handed out by no call until a refill gives them back. It
// is world state, persisted like an ENI, so that a restarted fakecloud
// keeps the vSwitch as dry as it was. IPv6 is never drained: a /64 does
// not run dry.
type drain struct {
	Addrs []netip.Addr `json:"addrs"`
}

// drainVSwitch takes free addresses of vSwitch id, or gives back held
// ones, until leave stay free (or as near as the addresses held allow),
// and returns the vSwitch's view. Addresses released later by ENIs
// become free as usual.
func (w *world) drainVSwitch(id string, leave int) (VSwitchView, error) {
	return w.setDrain(id, func(_, _ int) int { return leave })
}

// refillVSwitch gives back every address a drain holds on vSwitch id.
func (w *world) refillVSwitch(id string) (VSwitchView, error) {
	return w.setDrain(id, func(free, held int) int { return free + held })
}

// setDrain takes or gives back addresses of vSwitch id until as many
// stay free as target says, given how many are free and how many the
// drain holds, in one locked section.
func (w *world) setDrain(id string, target func(free, held int) int) (VSwitchView, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.st.VSwitches[id]
	if v == nil {
		return VSwitchView{}, apiErr(404, CodeVSwitchNotFound, "The specified VSwitchId %q is not found.", id)
	}
	d := w.st.Drains[id]
	if d == nil {
		d = &drain{}
	}
	free := v.pool4.available()
	if leave := target(free, len(d.Addrs)); free > leave {
		got, _ := v.pool4.take(free - leave)
		d.Addrs = append(d.Addrs, got...)
	} else {
		n := min(leave-free, len(d.Addrs))
		for _, a := range d.Addrs[len(d.Addrs)-n:] {
			v.pool4.release(a)
		}
		d.Addrs = d.Addrs[:len(d.Addrs)-n]
	}
	if len(d.Addrs) == 0 {
		delete(w.st.Drains, id)
	} else {
		w.st.Drains[id] = d
	}
	w.dirty.drain(id)
	return w.vswitchViewLocked(v), w.commitLocked()
}

// claimDrains marks the addresses persisted drains hold taken in their
// vSwitches' pools.
func (st *state) claimDrains() error {
	for id, d := range st.Drains {
		v := st.VSwitches[id]
		if v == nil {
			return fmt.Errorf("state: drain of unknown vswitch %s", id)
		}
		for _, a := range d.Addrs {
			if err := v.pool4.claim(a); err != nil {
				return fmt.Errorf("state: address %s drained from %s: %w", a, id, err)
			}
		}
	}
	return nil
}
