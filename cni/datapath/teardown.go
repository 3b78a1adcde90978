package datapath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// Teardown removes everything Setup created for the pod; what is already
// gone is not an error, so it may run any number of times, also when
// Setup never ran. With PodNetNS empty or vanished, or naming a namespace
// of another kind (see CheckNetNS), it cleans the node side only.
// ExclusiveENI moves the ENI back to the node under s.ENIName (down,
// without addresses) and never deletes it.
//
// The ENI state PolicyRoute shares between pods (the ENI table's default
// route, the node IP on the ENI) stays: other pods may use it, and an ENI
// without pods is harmless with it; the daemon owns the ENI's lifetime.
func Teardown(s *Spec) error { return teardown(s, false) }

// TeardownDeferred is Teardown for the critical path of a CNI DEL: instead
// of deleting the host veth, which blocks for the kernel's RCU grace
// periods (16 ms or more per link on small VMs), it sets it down and
// renames it to a name starting with ReapPrefix. Its peer in the pod goes
// with it: the kernel destroys the pair when the runtime removes the pod's
// namespace, and Reap deletes whatever retired veths are left. Everything
// else (rules, routes, the ENI of ExclusiveENI) is removed as by Teardown.
func TeardownDeferred(s *Spec) error { return teardown(s, true) }

func teardown(s *Spec, retire bool) error {
	e, err := openEnv(s, false)
	if err != nil {
		return err
	}
	defer e.close()
	e.retire = retire
	switch s.Kind {
	case PolicyRoute, VPCRoute:
		err = e.teardownVeth()
	case ExclusiveENI:
		err = e.teardownExclusiveENI()
	case IPVlan:
		err = e.teardownIPVlan()
	case VLAN:
		err = e.teardownVLAN()
	}
	if err != nil {
		return fmt.Errorf("tear down %s datapath of %s: %w", s.Kind, s.IfName, err)
	}
	return nil
}

// teardownVeth deletes the pod's veth (its routes, neighbours and qdiscs
// go with it) and, for PolicyRoute, the pod's rules.
func (e *env) teardownVeth() error {
	var errs []error
	if err := e.deleteVeth(e.s.HostVeth, e.s.IfName); err != nil {
		errs = append(errs, err)
	}
	if e.s.Kind == PolicyRoute {
		for _, f := range e.s.families() {
			if err := e.deletePodRules(f); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// deleteVeth deletes the host end hostName (the kernel deletes its peer)
// and, if the pod namespace is there, a veth named podName left in it. A
// host link of that name that is not this attachment's (another index: a
// newer sandbox of the same pod) is left alone. TeardownDeferred retires
// the pair instead (see retirePair).
func (e *env) deleteVeth(hostName, podName string) error {
	var errs []error
	if hostName != "" {
		l, err := e.host.linkByName(hostName)
		switch {
		case err != nil:
			errs = append(errs, err)
		case l == nil || l.Type() != "veth":
		case e.s.HostVethIndex != 0 && l.Attrs().Index != e.s.HostVethIndex:
			e.foreignHost = true
		case e.retire:
			if err := e.retirePair(l, podName); err == nil {
				return nil
			}
			errs = append(errs, e.host.deleteLink(l))
		default:
			errs = append(errs, e.host.deleteLink(l))
		}
	}
	if e.pod != nil {
		l, err := e.pod.linkByName(podName)
		switch {
		case err != nil:
			errs = append(errs, err)
		case l != nil && l.Type() == "veth":
			errs = append(errs, e.pod.deleteLink(l))
		}
	}
	return errors.Join(errs...)
}

// retirePair retires the host end and, when the pod namespace is there,
// its peer in the pod too (down and renamed, which drops its routes and
// frees the name for an ADD into the same namespace before the reaper
// has run). Both go when the reaper deletes the host end.
func (e *env) retirePair(host netlink.Link, podName string) error {
	if e.pod != nil {
		p, err := e.pod.linkByName(podName)
		if err != nil {
			return err
		}
		if p != nil && isPeer(host, p) {
			if err := e.pod.retireLink(p); err != nil {
				return err
			}
		}
	}
	return e.host.retireLink(host)
}

// deletePodRules removes the pod address's rules 512 and 2048: those
// pointing at this pod's host veth or at no interface (Terway main). When
// another link of the node still routes the address (a new pod got it
// before this late DEL), the interface-less rules belong to that pod and
// stay.
func (e *env) deletePodRules(f family) error {
	host := f.host()
	owned, err := e.routedElsewhere(f)
	if err != nil {
		return err
	}
	rules, err := e.host.RuleList(f.nl())
	if err != nil {
		return fmt.Errorf("list host rules: %w", err)
	}
	var errs []error
	for _, r := range rules {
		mine := (r.Priority == ToPodPriority && nlsafe.Prefix(r.Dst) == host) ||
			(r.Priority == FromPodPriority && nlsafe.Prefix(r.Src) == host)
		switch {
		case !mine, r.IifName != "" && r.IifName != e.s.HostVeth, r.IifName == "" && owned:
			continue
		case r.IifName != "" && e.foreignHost && owned:
			continue // the newer sandbox's rule: same veth name, same address
		}
		if err := e.host.RuleDel(&r); err != nil && !gone(err) {
			errs = append(errs, fmt.Errorf("delete rule %d %q: %w", r.Priority, ruleText(r), err))
		}
	}
	return errors.Join(errs...)
}

// routedElsewhere reports whether main routes the pod address to a link
// other than this pod's host veth (deleted by now).
func (e *env) routedElsewhere(f family) (bool, error) {
	routes, err := e.host.tableRoutes(f.nl(), unix.RT_TABLE_MAIN)
	if err != nil {
		return false, fmt.Errorf("list host routes: %w", err)
	}
	for _, r := range routes {
		if nlsafe.Prefix(r.Dst) != f.host() {
			continue
		}
		l, err := e.host.LinkByIndex(r.LinkIndex)
		if err != nil || strings.HasPrefix(l.Attrs().Name, ReapPrefix) {
			continue
		}
		if l.Attrs().Name != e.s.HostVeth || (e.s.HostVethIndex != 0 && l.Attrs().Index != e.s.HostVethIndex) {
			return true, nil
		}
	}
	return false, nil
}

// teardownExclusiveENI deletes the host peer, removes the ingress ifb and
// returns the ENI to the node.
func (e *env) teardownExclusiveENI() error {
	var errs []error
	if err := e.deleteVeth(e.s.HostVeth, HostPeerIfName); err != nil {
		errs = append(errs, err)
	}
	if e.s.ENIMAC == "" {
		return errors.Join(errs...)
	}
	mac, err := e.s.eniMAC()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if e.pod != nil {
		if err := e.releaseFromPod(mac); err != nil {
			errs = append(errs, err)
		}
	}
	// The ENI may be in the node already: returned by an earlier
	// Teardown, or by the kernel when the pod's namespace was destroyed
	// (then under another name, recognised by our alias).
	l, err := e.host.linkByMAC(mac)
	switch {
	case err != nil:
		errs = append(errs, err)
	case l != nil && aliasName(l.Attrs().Alias) != "":
		errs = append(errs, e.restoreInHost(l, e.nodeName(l)))
	}
	return errors.Join(errs...)
}

// releaseFromPod removes the ifb and moves the ENI out of the pod.
func (e *env) releaseFromPod(mac []byte) error {
	var errs []error
	if ifb, err := e.pod.linkByName(ifbName(e.s.IfName)); err != nil {
		errs = append(errs, err)
	} else if ifb != nil && ifb.Type() == "ifb" {
		errs = append(errs, e.pod.deleteLink(ifb))
	}
	l, err := e.pod.linkByMAC(mac)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if l != nil {
		errs = append(errs, e.clearQdiscs(l), e.returnENI(l))
	}
	return errors.Join(errs...)
}

// clearQdiscs removes the ENI's tbf and ingress qdiscs before it leaves
// the pod. The kernel drops them on a namespace move too; removing them
// explicitly does not depend on that.
func (e *env) clearQdiscs(l netlink.Link) error {
	qs, err := e.pod.QdiscList(l)
	if err != nil {
		return fmt.Errorf("list qdiscs of ENI %s in pod: %w", l.Attrs().Name, err)
	}
	var errs []error
	for _, q := range qs {
		_, tbf := q.(*netlink.Tbf)
		_, ingress := q.(*netlink.Ingress)
		if tbf || ingress {
			if err := e.pod.QdiscDel(q); err != nil && !gone(err) {
				errs = append(errs, fmt.Errorf("remove %s qdisc of ENI %s: %w", q.Type(), l.Attrs().Name, err))
			}
		}
	}
	return errors.Join(errs...)
}
