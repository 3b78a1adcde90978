package cnicheck

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/plugins/pkg/ns"
)

// nsExec runs plugins from inside a network namespace. A runtime runs the
// CNI plugin in the node's host namespace; a daemon that lives elsewhere
// (many daemons in one test process, the node simulation) must run it
// there too, or the plugin would check the wrong host side. The child
// inherits the namespace of the OS thread that forks it, which ns.Do
// locks for the duration.
type nsExec struct {
	invoke.Exec
	path string
}

// ExecPlugin implements invoke.Exec.
func (e nsExec) ExecPlugin(ctx context.Context, plugin string, stdin []byte, env []string) ([]byte, error) {
	var out []byte
	err := ns.WithNetNSPath(e.path, func(ns.NetNS) error {
		var err error
		out, err = e.Exec.ExecPlugin(ctx, plugin, stdin, env)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("in network namespace %s: %w", e.path, err)
	}
	return out, nil
}
