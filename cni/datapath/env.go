package datapath

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/containernetworking/plugins/pkg/ns"
)

// env is one operation's view of the node's and the pod's namespaces: a
// netlink handle bound to each, so no thread ever has to leave its own
// namespace for netlink work (only sysctls and link moves use ns.Do).
type env struct {
	s      *Spec
	hostNS ns.NetNS
	host   *nlh
	// podNS and pod are nil when the pod's namespace is absent or gone,
	// which only Teardown accepts.
	podNS ns.NetNS
	pod   *nlh
	// undo holds what this Setup created, newest last, so a failure
	// midway removes the pod's objects again.
	undo []undoStep
	// retire makes a teardown retire host veths instead of deleting them
	// (TeardownDeferred).
	retire bool
	// foreignHost is set by a teardown that found HostVeth's name on a
	// link that is not this attachment's (a newer sandbox of the pod).
	foreignHost bool
}

// undoStep removes one object a Setup created.
type undoStep struct {
	what string
	fn   func() error
}

// openEnv validates s and opens its namespaces. With podRequired (Setup,
// Check) s must describe a whole datapath; without (teardown) it needs
// only its kind and names, and a missing or vanished pod namespace, or a
// namespace file of another kind, leaves env.pod nil instead of failing.
func openEnv(s *Spec, podRequired bool) (*env, error) {
	validate := s.validateBase
	if podRequired {
		validate = s.validate
	}
	if err := validate(); err != nil {
		return nil, err
	}
	e := &env{s: s}
	var err error
	if e.hostNS, err = openHostNS(s.HostNetNS); err != nil {
		return nil, err
	}
	if e.host, err = newNLH(e.hostNS, "host"); err != nil {
		e.close()
		return nil, err
	}
	if s.PodNetNS == "" {
		if podRequired {
			e.close()
			return nil, errors.New("no pod network namespace given")
		}
		return e, nil
	}
	podNS, err := ns.GetNS(s.PodNetNS)
	switch {
	case err == nil:
	case !podRequired && vanished(err):
		return e, nil
	default:
		e.close()
		return nil, fmt.Errorf("open pod network namespace %q: %w", s.PodNetNS, err)
	}
	if err := checkNetNSFd(podNS); err != nil {
		_ = podNS.Close()
		var other *OtherNSKindError
		if !podRequired && errors.As(err, &other) {
			// Nothing of the pod's can be in it (an older plugin recorded
			// it for an ADD that failed there): the node side only.
			slog.Warn("datapath: pod netns is not a network namespace, tearing down the node side only", "err", err)
			return e, nil
		}
		e.close()
		return nil, fmt.Errorf("open pod network namespace: %w", err)
	}
	e.podNS = podNS
	if e.pod, err = newNLH(podNS, "pod"); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// openHostNS opens the node's namespace; "" is the calling thread's.
func openHostNS(path string) (ns.NetNS, error) {
	if path == "" {
		n, err := ns.GetCurrentNS()
		if err != nil {
			return nil, fmt.Errorf("open current network namespace: %w", err)
		}
		return n, nil
	}
	n, err := ns.GetNS(path)
	if err != nil {
		return nil, fmt.Errorf("open host network namespace %q: %w", path, err)
	}
	return n, nil
}

// vanished reports whether ns.GetNS failed because the namespace is gone:
// its path no longer exists, or is a leftover file no longer bind-mounted.
func vanished(err error) bool {
	var notExist ns.NSPathNotExistErr
	var notNS ns.NSPathNotNSErr
	return errors.As(err, &notExist) || errors.As(err, &notNS)
}

// close releases handles and namespace files.
func (e *env) close() {
	if e.pod != nil {
		e.pod.Close()
	}
	if e.podNS != nil {
		_ = e.podNS.Close()
	}
	if e.host != nil {
		e.host.Close()
	}
	if e.hostNS != nil {
		_ = e.hostNS.Close()
	}
}

// created records an object this Setup made, with how to remove it.
func (e *env) created(what string, fn func() error) {
	e.undo = append(e.undo, undoStep{what: what, fn: fn})
}

// rollback removes, newest first, what this Setup created. Failures are
// logged: the Setup error already goes to the caller, and a later
// Teardown retries the removal.
func (e *env) rollback() {
	for i := len(e.undo) - 1; i >= 0; i-- {
		st := e.undo[i]
		if err := st.fn(); err != nil {
			slog.Warn("datapath: undo of failed setup", "object", st.what, "err", err)
		}
	}
	e.undo = nil
}
