package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/terway-sim/terway/lab/cluster"
	"github.com/terway-sim/terway/lab/demo"
	"github.com/terway-sim/terway/lab/hostcheck"
)

func newDemoCommand(g *globals) *cobra.Command {
	o := &upOptions{}
	var out string
	var replicas int
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Up, deploy Terway, run a workload with connectivity checks, audit, report, down",
		Long: `demo brings a lab up (2 nodes by default), runs a web workload sized to the
mode's capacity on a cold pool, scales it to 0 and back on the warm pool,
checks connectivity pod to pod on one node and across nodes and pod to
Service, runs the audit, prints the report (also written as JSON and
Markdown to --out) and takes the lab down. It snapshots the machine before up
and after down and fails if anything differs: namespaces, the root
namespace's links, addresses, rules, routes and neighbours, iptables,
ip6tables and ebtables, sysctls, mounts, cgroups, processes and the
production paths Terway uses.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), g, o, out, replicas, keep)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().StringVar(&out, "out", "demo-report", "directory for report.json and report.md")
	cmd.Flags().IntVar(&replicas, "replicas", 0, "workload size (default: sized to the mode's capacity)")
	cmd.Flags().BoolVar(&keep, "keep", false, "leave the lab up afterwards (no machine comparison)")
	return cmd
}

func runDemo(ctx context.Context, g *globals, o *upOptions, out string, replicas int, keep bool) error {
	return withLab(ctx, g, o, keep, func(ctx context.Context, st *cluster.State) error {
		rep, err := demoOn(ctx, g, st, replicas)
		if rep != nil {
			err = errors.Join(err, writeReports(g, rep, out))
		}
		return err
	})
}

// withLab brings a lab up, runs body on it, takes the lab down and
// compares the machine with a snapshot taken before up (after the
// prerequisites, which may install packages). keep leaves the lab up.
func withLab(ctx context.Context, g *globals, o *upOptions, keep bool, body func(context.Context, *cluster.State) error) error {
	before, st, err := upWithin(ctx, g, o)
	if err != nil {
		return err
	}
	// The body has no deadline of ours: --timeout is for bringing the lab
	// up; the suites (go test -timeout) and the demo bound themselves.
	berr := body(ctx, st)
	if keep {
		return berr
	}
	if err := cluster.Down(g.dir(), g.stdout); err != nil {
		return errors.Join(berr, err)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), compareTimeout)
	defer cancel()
	return errors.Join(berr, compareMachine(cctx, g, before, o.cfg))
}

// compareTimeout bounds the machine's second snapshot and its comparison.
const compareTimeout = 5 * time.Minute

// upWithin snapshots the machine and brings the lab up, both within
// --timeout.
func upWithin(ctx context.Context, g *globals, o *upOptions) (*hostcheck.Snapshot, *cluster.State, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	start := time.Now()
	if err := prepare(ctx, g, o); err != nil {
		return nil, nil, err
	}
	before, err := hostcheck.Take(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot the machine: %w", err)
	}
	st, err := launch(ctx, g, o, start)
	if err != nil {
		return nil, nil, err
	}
	return before, st, nil
}

// demoOn runs the demo on a running lab.
func demoOn(ctx context.Context, g *globals, st *cluster.State, replicas int) (*demo.Report, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		return nil, err
	}
	kube, err := kubeClient(st)
	if err != nil {
		return nil, err
	}
	rep, err := demo.Run(ctx, demo.Options{State: st, Kube: kube, Rest: rc, Replicas: replicas, Progress: g.stdout})
	if err != nil {
		return rep, fmt.Errorf("demo: %w", err)
	}
	if !rep.OK() {
		err = errors.New("demo failed: connectivity or audit")
	}
	return rep, err
}

func writeReports(g *globals, rep *demo.Report, out string) error {
	if err := rep.WriteText(g.stdout); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for name, write := range map[string]func(*os.File) error{
		"report.json": func(f *os.File) error { return rep.WriteJSON(f) },
		"report.md":   func(f *os.File) error { return rep.WriteMarkdown(f) },
	} {
		f, err := os.Create(filepath.Join(out, name))
		if err != nil {
			return err
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	printf(g.stdout, "report written to %s/report.{json,md}\n", out)
	return nil
}

// compareMachine fails if the machine differs from before. New processes
// count only if they could be the lab's: outside the root network
// namespace (every node process) or running from the lab's binaries, its
// state directory or terway-lab itself; others belong to whoever else
// uses the machine meanwhile (a build, an editor). Likewise only the
// nodes' cgroup trees are compared: a cgroup of someone else's that
// vanished during the run is not the lab's doing.
func compareMachine(ctx context.Context, g *globals, before *hostcheck.Snapshot, cfg cluster.Config) error {
	after, err := hostcheck.Take(ctx)
	if err != nil {
		return fmt.Errorf("snapshot the machine: %w", err)
	}
	labs := func(p hostcheck.Process) bool {
		if p.NetNS != "" && p.NetNS != after.RootNetNS {
			return true
		}
		for _, mark := range []string{cfg.BinDir, cfg.Dir, "terway-lab"} {
			if mark != "" && strings.Contains(p.Cmdline, mark) {
				return true
			}
		}
		return false
	}
	diffs := hostcheck.DiffOptions{IgnoreProcess: func(p hostcheck.Process) bool { return !labs(p) },
		OwnCgroup: cluster.IsLabCgroup}.Diff(before, after)
	if len(diffs) == 0 {
		printf(g.stdout, "machine after down: as before up (no differences)\n")
		return nil
	}
	printf(g.stdout, "machine after down differs from before up:\n")
	_ = hostcheck.WriteDifferences(g.stdout, diffs)
	return fmt.Errorf("the lab left %d difference(s) on the machine", len(diffs))
}
