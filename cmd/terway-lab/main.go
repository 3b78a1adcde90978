// Command terway-lab runs the project's lab: a real Kubernetes cluster on
// this machine (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler on 127.0.0.1; nodes as network and mount namespaces with
// containerd, kubelet and kube-proxy) whose cloud is fakecloud, with
// Terway deployed from deploy/. See `terway-lab --help` and README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/lab/cluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(1)
	}
}

// globals are the flags every command shares.
type globals struct {
	stdout, stderr io.Writer
	name           string
	stateDir       string
}

// dir is the lab's state directory.
func (g *globals) dir() string {
	if g.stateDir != "" {
		return g.stateDir
	}
	return filepath.Join(cluster.DefaultStateRoot, g.name)
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "terway-lab",
		Short: "A real Kubernetes lab on fakecloud, with Terway deployed from deploy/",
		Long: `terway-lab brings up real Kubernetes on this machine with fakecloud where
production has Alibaba Cloud: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler on 127.0.0.1, and nodes that are emulated ECS instances, each a
network namespace (its ENIs are real interfaces plugged in by fakecloud) and a
mount namespace running containerd, kubelet and kube-proxy. Terway is applied
from deploy/ with the lab overlay. The machine's own network, mounts, cgroups
and paths stay untouched, and down removes everything.

The first up builds Kubernetes v1.37.2, etcd, containerd and runc from the Go
module proxy (about 15 minutes on 2 cores) into the cache (.lab/cache in the
repository); later runs reuse it. Run as root.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.name, "name", "lab", "lab name (1-8 of [a-z0-9-]); nodes are <name>-<i>")
	pf.StringVar(&g.stateDir, "state-dir", "", "lab state directory (default "+cluster.DefaultStateRoot+"/<name>)")
	root.AddCommand(newUpCommand(g), newDownCommand(g), newStatusCommand(g), newEnvCommand(g),
		newAuditCommand(g), newDemoCommand(g), newTestCommand(g), newSuperviseCommand(g))
	root.AddCommand(newChaosCommand(g))
	root.AddCommand(newNodeCommand(g), newKillCommand(g))
	return root
}

func newDownCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Take the lab down and remove everything it left on the machine (idempotent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cluster.Down(g.dir(), g.stdout)
		},
	}
}

// printf writes to w, ignoring errors of a terminal that went away.
func printf(w io.Writer, format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
