package datapath

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
)

// Links of a parent in the node (an ipvlan slave, a VLAN sub-interface)
// are made directly in the pod's namespace, but the kernel checks their
// name in the node's namespace as well, where IfName (eth0) is usually
// taken. So they are made under a temporary name, free in both, and
// renamed to IfName in the pod, as Terway does. A Setup that dies in
// between leaves the link under its temporary name: the next Setup adopts
// it and Teardown removes it.

// tempPrefix starts a pod link's temporary name.
const tempPrefix = "twtmp"

// tempName is a new temporary name: the prefix and 10 random hex digits.
func tempName() (string, error) {
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random link name: %w", err)
	}
	return tempPrefix + hex.EncodeToString(b), nil
}

// createInPod returns the pod's interface IfName: the existing one if
// ours accepts it, else one of ours left under a temporary name, else a
// new link that mk describes under the name it is given. what describes
// the link for errors.
func (e *env) createInPod(ours func(netlink.Link) bool, what string, mk func(name string) netlink.Link) (netlink.Link, error) {
	l, err := e.pod.linkByName(e.s.IfName)
	if err != nil {
		return nil, err
	}
	if l != nil {
		if ours(l) {
			return l, nil
		}
		return nil, fmt.Errorf("pod already has a link %s (%s) that is not %s", e.s.IfName, l.Type(), what)
	}
	if l, err = e.leftInPod(ours); err != nil {
		return nil, err
	}
	if l == nil {
		name, err := tempName()
		if err != nil {
			return nil, err
		}
		link := mk(name)
		if err := e.host.LinkAdd(link); err != nil {
			if _, vlan := link.(*netlink.Vlan); vlan && unsupported(err) {
				err = fmt.Errorf("%w: %v", ErrVLANUnsupported, err)
			}
			return nil, fmt.Errorf("add %s in pod: %w", what, err)
		}
		if l, err = e.pod.linkByName(name); err != nil {
			return nil, err
		}
		if l == nil {
			return nil, fmt.Errorf("%s vanished from the pod after creation", what)
		}
		made := l
		e.created(what+" in pod", func() error { return e.pod.deleteLink(made) })
	}
	if err := e.pod.LinkSetName(l, e.s.IfName); err != nil {
		return nil, fmt.Errorf("rename %s in pod from %s to %s: %w", what, l.Attrs().Name, e.s.IfName, err)
	}
	return e.pod.LinkByIndex(l.Attrs().Index)
}

// leftInPod finds a link of ours under a temporary name.
func (e *env) leftInPod(ours func(netlink.Link) bool) (netlink.Link, error) {
	links, err := e.pod.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links in pod: %w", err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, tempPrefix) && ours(l) {
			return l, nil
		}
	}
	return nil, nil
}

// deletePodLinks deletes the pod's interface IfName and any link under a
// temporary name if they are of kind (ipvlan, vlan), and the interface's
// ifb.
func (e *env) deletePodLinks(kind string) error {
	links, err := e.pod.LinkList()
	if err != nil {
		return fmt.Errorf("list links in pod: %w", err)
	}
	var errs []error
	for _, l := range links {
		name := l.Attrs().Name
		mine := (name == e.s.IfName || strings.HasPrefix(name, tempPrefix)) && l.Type() == kind
		if mine || (name == ifbName(e.s.IfName) && l.Type() == "ifb") {
			errs = append(errs, e.pod.deleteLink(l))
		}
	}
	return errors.Join(errs...)
}
