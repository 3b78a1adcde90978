package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/lab/cluster"
	"github.com/terway-sim/terway/lab/prereq"
)

// upOptions are the flags of up (and of demo, which runs up).
type upOptions struct {
	cfg      cluster.Config
	repo     string
	cacheDir string
	noApt    bool
	timeout  time.Duration
	// mode is --mode; prepare puts it into cfg.Mode, which Validate checks.
	mode string
}

func (o *upOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&o.cfg.Nodes, "nodes", 2, "number of nodes (instances of the world)")
	f.StringVar(&o.mode, "mode", string(mode.Default), "Terway mode: ENIMultiIP, ENIOnly or VPC")
	f.StringVar(&o.cfg.InstanceType, "instance-type", cluster.DefaultInstanceType, "ECS instance type of the nodes")
	f.StringVar(&o.cfg.WorldFile, "world", "", "fakecloud world file; its running instances become the nodes")
	f.Float64Var(&o.cfg.TimeScale, "time-scale", 1, "scale of fakecloud's delays (attach, metadata lag, ...)")
	f.StringVar(&o.cfg.IPStack, "ip-stack", "ipv4", "eni_conf ip_stack: ipv4, or dual (pods get an IPv6 address of their ENI too)")
	f.StringVar(&o.repo, "repo", "", "the project's source tree (default: found above the working directory)")
	f.StringVar(&o.cacheDir, "cache-dir", "", "prerequisite cache (default <repo>/.lab/cache)")
	f.BoolVar(&o.noApt, "no-apt", false, "do not install missing Debian packages")
	f.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up if the lab is not ready in time (includes building prerequisites)")
}

func newUpCommand(g *globals) *cobra.Command {
	o := &upOptions{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Build what is missing, bring the lab up in the background and deploy Terway",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := up(cmd.Context(), g, o)
			return err
		},
	}
	o.addFlags(cmd)
	return cmd
}

// up brings a lab up and returns its state once it is ready.
func up(ctx context.Context, g *globals, o *upOptions) (*cluster.State, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	start := time.Now()
	if err := prepare(ctx, g, o); err != nil {
		return nil, err
	}
	return launch(ctx, g, o, start)
}

// prepare checks the request, clears a dead lab of the same name and
// builds or finds the prerequisites.
func prepare(ctx context.Context, g *globals, o *upOptions) error {
	if os.Geteuid() != 0 {
		return errors.New("terway-lab needs root (network namespaces, mounts, cgroups)")
	}
	o.cfg.Name, o.cfg.Dir, o.cfg.Mode = g.name, g.dir(), mode.Mode(o.mode)
	if err := o.cfg.Validate(); err != nil {
		return err
	}
	if err := clearOld(g); err != nil {
		return err
	}
	start := time.Now()
	tools, err := prereq.Ensure(ctx, prereq.Options{RepoDir: o.repo, CacheDir: o.cacheDir, Progress: g.stdout, Apt: !o.noApt})
	if err != nil {
		return fmt.Errorf("prerequisites: %w", err)
	}
	printf(g.stdout, "prerequisites ready in %.0fs\n", time.Since(start).Seconds())
	o.cfg.BinDir, o.cfg.Images, o.cfg.TerwayImage = tools.BinDir, tools.Images, tools.TerwayImage
	return nil
}

// launch starts the supervisor and waits until the lab is ready; a lab
// that fails is taken down again, its logs kept.
func launch(ctx context.Context, g *globals, o *upOptions, start time.Time) (*cluster.State, error) {
	if err := cluster.WriteConfig(o.cfg); err != nil {
		return nil, err
	}
	if err := startSupervisor(g); err != nil {
		return nil, err
	}
	st, err := waitUp(ctx, g)
	if err != nil {
		printf(g.stderr, "lab failed: %v\n", err)
		keepLogs(g)
		if derr := cluster.Down(g.dir(), g.stdout); derr != nil {
			printf(g.stderr, "down: %v\n", derr)
		}
		return nil, err
	}
	printf(g.stdout, "lab %s is up: %d nodes, mode %s, %.0fs to Ready (%.0fs in all)\n",
		st.Name, len(st.Nodes), st.Mode, st.UpSeconds, time.Since(start).Seconds())
	printf(g.stdout, "in another terminal: eval $(%s env%s)\n", os.Args[0], nameFlag(g))
	return st, nil
}

// clearOld refuses to replace a running lab, and cleans up after one whose
// supervisor died.
func clearOld(g *globals) error {
	st, err := cluster.ReadState(g.dir())
	if errors.Is(err, cluster.ErrNoLab) {
		return nil
	}
	if err == nil && st.SupervisorRunning() && st.Phase != cluster.PhaseFailed {
		return fmt.Errorf("lab %s is already up (supervisor pid %d); run terway-lab down first", st.Name, st.SupervisorPID)
	}
	printf(g.stdout, "cleaning up an earlier lab in %s\n", g.dir())
	return cluster.Down(g.dir(), g.stdout)
}

// startSupervisor starts `terway-lab supervise` detached from this
// terminal, with its output in logs/supervisor.log.
func startSupervisor(g *globals) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logs := filepath.Join(g.dir(), "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(logs, "supervisor.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	// setsid --fork: the supervisor gets its own session and init as its
	// parent, so it outlives this command and is nobody's descendant.
	cmd := exec.Command("setsid", "--fork", self, "supervise", "--name", g.name, "--state-dir", g.dir())
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("start the lab supervisor: %w", err)
	}
	return nil
}

// waitUp follows the supervisor's progress until the lab is ready.
func waitUp(ctx context.Context, g *globals) (*cluster.State, error) {
	last := ""
	begun := time.Now()
	for {
		st, err := cluster.ReadState(g.dir())
		if errors.Is(err, cluster.ErrNoLab) && time.Since(begun) > time.Minute {
			return nil, errors.New("the lab supervisor wrote no state within a minute (see its log)")
		}
		if err == nil {
			if st.Progress != last && st.Phase == cluster.PhaseStarting {
				printf(g.stdout, "lab: %s\n", st.Progress)
				last = st.Progress
			}
			switch st.Phase {
			case cluster.PhaseReady:
				return st, nil
			case cluster.PhaseFailed, cluster.PhaseStopping:
				return nil, errors.New(st.Error)
			}
			if st.SupervisorPID > 0 && !st.SupervisorRunning() {
				return nil, errors.New("the lab supervisor died")
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the lab: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// keepLogs copies the logs of a failed lab out of its directory, which
// down removes, so the failure can be read afterwards.
func keepLogs(g *globals) {
	dst := filepath.Join(os.TempDir(), "terway-lab-"+g.name+"-logs")
	_ = os.RemoveAll(dst)
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(g.dir(), "logs"))); err == nil {
		printf(g.stderr, "logs kept in %s\n", dst)
	}
}

func nameFlag(g *globals) string {
	if g.name == "lab" && g.stateDir == "" {
		return ""
	}
	return fmt.Sprintf(" --name %s --state-dir %s", g.name, g.dir())
}
