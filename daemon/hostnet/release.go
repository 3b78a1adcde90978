package hostnet

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// Removed counts what Release deleted, so GC logs show whether a release
// actually found leftovers or was a no-op.
type Removed struct {
	Rules  int
	Routes int
}

// String formats the counts for log lines.
func (r Removed) String() string {
	return fmt.Sprintf("%d rules, %d routes", r.Rules, r.Routes)
}

// Release removes the host-side leftovers of a pod address: every policy
// rule selecting exactly that address as source or destination (the 512 "to"
// and 2048 "from" rules, with or without iif) and every route to exactly
// that address in any table (main and the per-ENI tables; not the local
// table or kernel routes of host addresses, see podRoute). It is idempotent
// because GC may retry, and the CNI DEL may race it: entries already gone
// count as success. Rules and routes of other addresses, and the default
// rules, are never touched. On error, Removed still counts what was deleted.
func (h *Host) Release(ip netip.Addr) (Removed, error) {
	prefix, family, err := hostPrefix(ip)
	if err != nil {
		return Removed{}, fmt.Errorf("release %s: %w", ip, err)
	}
	nl, err := h.lock()
	defer h.mu.Unlock()
	if err != nil {
		return Removed{}, fmt.Errorf("release %s: %w", ip, err)
	}
	var rm Removed
	var ruleErr, routeErr error
	rm.Rules, ruleErr = releaseRules(nl, prefix, family)
	rm.Routes, routeErr = releaseRoutes(nl, prefix, family)
	if err := errors.Join(ruleErr, routeErr); err != nil {
		return rm, fmt.Errorf("release %s in %s: %w", ip, h.nsPath, err)
	}
	return rm, nil
}

// releaseRules deletes the rules selecting prefix.
func releaseRules(nl *nlsafe.Handle, prefix netip.Prefix, family int) (int, error) {
	rules, err := listRules(nl, family)
	if err != nil {
		return 0, err
	}
	return deleteMatching(rules,
		func(r *netlink.Rule) bool { return !defaultRule(r) && ruleSelects(r, prefix) },
		func(r *netlink.Rule) (bool, error) { return deleteRule(nl, r) })
}

// deleteMatching deletes, with del, every listed object that match
// selects, continuing past failures so one stuck object does not keep the
// others around. It counts those del reports deleted.
func deleteMatching[T any](objs []T, match func(*T) bool, del func(*T) (bool, error)) (int, error) {
	n := 0
	var errs []error
	for i := range objs {
		if !match(&objs[i]) {
			continue
		}
		deleted, err := del(&objs[i])
		if err != nil {
			errs = append(errs, err)
		}
		if deleted {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// ruleSelects reports whether the rule's source or destination is exactly
// prefix; wider selectors (a vSwitch CIDR) belong to no single pod.
func ruleSelects(r *netlink.Rule, prefix netip.Prefix) bool {
	if p, ok := toPrefix(r.Src); ok && p == prefix {
		return true
	}
	p, ok := toPrefix(r.Dst)
	return ok && p == prefix
}

// deleteRule deletes a listed rule with all its attributes, so the kernel
// removes that very rule; ENOENT means someone else (the CNI DEL) won.
func deleteRule(nl *nlsafe.Handle, r *netlink.Rule) (bool, error) {
	err := nl.RuleDel(r)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete rule %s: %w", r, err)
	}
	return true, nil
}

// releaseRoutes deletes the routes to prefix in every table except those
// podRoute excludes.
func releaseRoutes(nl *nlsafe.Handle, prefix netip.Prefix, family int) (int, error) {
	routes, err := listRoutes(nl, family)
	if err != nil {
		return 0, err
	}
	return deleteMatching(routes,
		func(r *netlink.Route) bool { p, ok := toPrefix(r.Dst); return ok && p == prefix && podRoute(r) },
		func(r *netlink.Route) (bool, error) { return deleteRoute(nl, r) })
}

// deleteRoute deletes one listed route by its key (destination, TOS, table,
// metric), type, scope and device: enough to pick it out without echoing
// attributes (flags, preferences) the kernel reports but may not accept
// back. Scope must be sent because netlink would otherwise send "universe",
// which the kernel matches literally. ESRCH means the route is gone.
func deleteRoute(nl *nlsafe.Handle, r *netlink.Route) (bool, error) {
	del := &netlink.Route{
		Family:    r.Family,
		Dst:       r.Dst,
		Tos:       r.Tos,
		Table:     r.Table,
		Priority:  r.Priority,
		Type:      r.Type,
		Scope:     r.Scope,
		LinkIndex: r.LinkIndex,
	}
	err := nl.RouteDel(del)
	if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete route %s table %d: %w", r.Dst, r.Table, err)
	}
	return true, nil
}
