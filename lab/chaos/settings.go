package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// readSettings reads fakecloud's settings and call counters as the step
// starts.
func readSettings(ctx context.Context, r *run, st *stepRun) error {
	var err error
	if st.settings, err = r.e.Cloud.Settings(ctx); err != nil {
		return fmt.Errorf("read settings: %w", err)
	}
	if st.before, err = r.e.Cloud.Calls(ctx); err != nil {
		return fmt.Errorf("read call counters: %w", err)
	}
	return nil
}

// changeSettings saves restore, then applies change.
func changeSettings(ctx context.Context, r *run, st *stepRun, change, restore map[string]any) error {
	st.restore = restore
	if _, err := r.e.Cloud.UpdateSettings(ctx, change); err != nil {
		return fmt.Errorf("update settings: %w", err)
	}
	return nil
}

// applySlowAsync makes attach and detach take the step's delay.
func applySlowAsync(ctx context.Context, r *run, st *stepRun) (string, error) {
	st.resolved = "account"
	if err := readSettings(ctx, r, st); err != nil {
		return "", err
	}
	cur, d := st.settings, st.Params.Delay
	change := map[string]any{"attachDelay": d, "detachDelay": d}
	restore := map[string]any{"attachDelay": cur.AttachDelay, "detachDelay": cur.DetachDelay}
	if err := changeSettings(ctx, r, st, change, restore); err != nil {
		return "", err
	}
	return fmt.Sprintf("attach and detach delays %s (were %s, %s)", d.D(), cur.AttachDelay.D(), cur.DetachDelay.D()), nil
}

// applyThrottle cuts the budgets of the step's actions. The whole map
// read before is what the undo writes back, so actions that had only the
// default budget get no budget of their own afterwards.
func applyThrottle(ctx context.Context, r *run, st *stepRun) (string, error) {
	st.resolved = "account"
	if err := readSettings(ctx, r, st); err != nil {
		return "", err
	}
	cut := maps.Clone(st.settings.Throttle)
	if cut == nil {
		cut = map[string]int{}
	}
	var was []string
	for _, a := range st.Params.Actions {
		cut[a] = st.Params.Budget
		was = append(was, fmt.Sprintf("%s %d", a, budget(st.settings, a)))
	}
	restore := map[string]any{"throttle": st.settings.Throttle}
	if err := changeSettings(ctx, r, st, map[string]any{"throttle": cut}, restore); err != nil {
		return "", err
	}
	return fmt.Sprintf("budget %d per %s (was %s)", st.Params.Budget, st.settings.ThrottleWindow.D(), strings.Join(was, ", ")), nil
}

// restoreSettings undoes a settings change.
func restoreSettings(ctx context.Context, r *run, st *stepRun) (string, error) {
	cerr := readCallsAfter(ctx, r, st)
	if st.restore == nil {
		return "nothing to restore", cerr
	}
	if _, err := r.e.Cloud.UpdateSettings(ctx, st.restore); err != nil {
		return "", errors.Join(cerr, fmt.Errorf("restore settings: %w", err))
	}
	st.restore = nil
	return "settings restored", cerr
}

// drainVSwitches drains the vSwitches the step's target means.
func drainVSwitches(ctx context.Context, r *run, st *stepRun) (string, error) {
	if err := readSettings(ctx, r, st); err != nil {
		return "", err
	}
	w, err := r.e.Cloud.World(ctx)
	if err != nil {
		return "", fmt.Errorf("read the world: %w", err)
	}
	ids, err := chooseVSwitches(w.VSwitches, st)
	if err != nil {
		return "", err
	}
	st.resolved = strings.Join(ids, ",")
	for _, id := range ids {
		if err := r.e.Cloud.DrainVSwitch(ctx, id, st.Params.Leave); err != nil {
			return strings.Join(st.drained, ","), fmt.Errorf("drain %s: %w", id, err)
		}
		st.drained = append(st.drained, id)
	}
	return fmt.Sprintf("drained %s to %d free", st.resolved, st.Params.Leave), nil
}

// chooseVSwitches resolves a vSwitch target among the world's.
func chooseVSwitches(vsws []admin.VSwitchView, st *stepRun) ([]string, error) {
	slices.SortFunc(vsws, func(a, b admin.VSwitchView) int { return cmp.Compare(a.ID, b.ID) })
	ids := make([]string, len(vsws))
	for i, v := range vsws {
		ids[i] = v.ID
	}
	t := st.target()
	switch {
	case t.scope == TargetVSwitch && !slices.Contains(ids, t.name):
		return nil, fmt.Errorf("no vSwitch %s in the world", t.name)
	case t.scope == TargetVSwitch:
		return []string{t.name}, nil
	case len(ids) == 0:
		return nil, errors.New("the world has no vSwitch")
	case t.scope == TargetRandomVSwitch:
		return []string{ids[st.rng().IntN(len(ids))]}, nil
	}
	return ids, nil
}

// refillVSwitches gives back what drainVSwitches took.
func refillVSwitches(ctx context.Context, r *run, st *stepRun) (string, error) {
	cerr := readCallsAfter(ctx, r, st)
	detail, err := undoEach(st, &st.drained, "refill", func(id string) error { return r.e.Cloud.RefillVSwitch(ctx, id) })
	return detail, errors.Join(cerr, err)
}
