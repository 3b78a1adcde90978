// Package nsexec runs CNI plugins from inside a network namespace.
//
// A runtime runs a CNI plugin in the node's host namespace. A caller that
// lives elsewhere — a daemon among many in one test process, a node of the
// lab simulation, a test driving the plugin for a lab node — must run it
// there too, or the plugin would see the wrong host side.
package nsexec

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/plugins/pkg/ns"
)

// Exec runs plugins through the embedded invoke.Exec from inside the
// network namespace at Path. The child inherits the namespace of the OS
// thread that forks it, which ns.WithNetNSPath locks for the call.
type Exec struct {
	invoke.Exec
	Path string
}

// ExecPlugin implements invoke.Exec.
func (e Exec) ExecPlugin(ctx context.Context, plugin string, stdin []byte, env []string) ([]byte, error) {
	var out []byte
	err := ns.WithNetNSPath(e.Path, func(ns.NetNS) error {
		var err error
		out, err = e.Exec.ExecPlugin(ctx, plugin, stdin, env)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("in network namespace %s: %w", e.Path, err)
	}
	return out, nil
}
