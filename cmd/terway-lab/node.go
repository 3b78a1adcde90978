package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/lab/cluster"
)

func newNodeCommand(g *globals) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Add, remove, stop, start or release a node of the running lab",
		Long: `node changes the running lab's nodes through its supervisor (the control
socket in the lab's directory), as the cloud and an operator would:

  add          a new instance of the lab's instance type in the next vSwitch
               joins: its namespace, certificates, containerd, kubelet and
               kube-proxy; returns when it is Ready and terway runs on it
  remove NAME  cordon and drain the node (every pod but DaemonSet pods
               evicted and gone), then release it
  stop NAME    power-off: the instance stops (its ENIs are unplugged), every
               process of the node dies, what a reboot clears is cleared
               (links, rules, routes, iptables of its namespace; its /run);
               its disks stay
  start NAME   power-on: the instance starts, containerd, kubelet and
               kube-proxy start again; terway comes back through the kubelet
  release NAME the instance is released (its ENIs detached or deleted), the
               node's processes, namespace, disks and Node object go`,
	}
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
	op := func(use, short string, f func(*cluster.Control, context.Context, string) error) *cobra.Command {
		return &cobra.Command{
			Use: use + " NAME", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return withControl(cmd.Context(), g, timeout, func(ctx context.Context, c *cluster.Control) error {
					if err := f(c, ctx, args[0]); err != nil {
						return err
					}
					printf(g.stdout, "node %s: %s done\n", args[0], use)
					return nil
				})
			},
		}
	}
	add := &cobra.Command{
		Use: "add", Short: "Add a node; returns when it is Ready with terway", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withControl(cmd.Context(), g, timeout, func(ctx context.Context, c *cluster.Control) error {
				n, err := c.AddNode(ctx)
				if err != nil {
					return err
				}
				printf(g.stdout, "node %s added: instance %s (%s) in %s, %s\n", n.Name, n.InstanceID, n.InstanceType, n.Zone, n.PrimaryIP)
				return nil
			})
		},
	}
	cmd.AddCommand(add,
		op("remove", "Cordon and drain a node, then release it", (*cluster.Control).RemoveNode),
		op("stop", "Power a node off (instance stopped, processes killed, disks kept)", (*cluster.Control).StopNode),
		op("start", "Power a stopped node on again", (*cluster.Control).StartNode),
		op("release", "Release a node's instance and delete its Node object", (*cluster.Control).ReleaseNode))
	return cmd
}

func newKillCommand(g *globals) *cobra.Command {
	var node string
	var downtime, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "kill COMPONENT",
		Short: "SIGKILL terwayd, containerd, kubelet or kube-apiserver of the running lab",
		Long: `kill sends SIGKILL to one component of the running lab through its supervisor:

  terwayd         the terwayd process of the node's terway pod; the kubelet
                  restarts the container (if none runs at that moment, as in
                  the kubelet's back-off, kill waits for one)
  containerd      the node's containerd; pods keep running; the supervisor
  kubelet         starts it again after --downtime
  kube-apiserver  the control plane's API server (no --node); started again
                  after --downtime

The command returns after the kill, not after the restart.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{cluster.ComponentTerwayd, cluster.ComponentContainerd, cluster.ComponentKubelet, cluster.ComponentAPIServer},
		RunE: func(cmd *cobra.Command, args []string) error {
			return withControl(cmd.Context(), g, timeout, func(ctx context.Context, c *cluster.Control) error {
				if err := c.Kill(ctx, args[0], node, downtime); err != nil {
					return err
				}
				printf(g.stdout, "killed %s%s\n", args[0], map[bool]string{true: " on " + node}[node != ""])
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&node, "node", "", "the node (terwayd, containerd, kubelet)")
	f.DurationVar(&downtime, "downtime", 10*time.Second, "how long containerd, kubelet or kube-apiserver stays down")
	f.DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long (terwayd waits for one to kill)")
	return cmd
}

// withControl runs f with the lab supervisor's control, within timeout.
func withControl(ctx context.Context, g *globals, timeout time.Duration, f func(context.Context, *cluster.Control) error) error {
	c, err := cluster.DialControl(g.dir())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return f(ctx, c)
}
