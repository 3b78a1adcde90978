package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/lab/cluster"
	"github.com/terway-sim/terway/lab/prereq"
)

func newTestCommand(g *globals) *cobra.Command {
	o := &upOptions{}
	var keep, crash bool
	cmd := &cobra.Command{
		Use:   "test [-- go test flags]",
		Short: "Up, run the scenario suites (go test ./scenarios/) against the lab, down, compare the machine",
		Long: `test brings a lab up, runs the scenario suites in scenarios/ against it with
every tier available (API server, fakecloud admin, node access: the same
variables terway-lab env prints), takes the lab down and fails if the machine
differs from before. Arguments after -- go to go test, e.g.
  terway-lab test -- -run TestScenarios -args -ginkgo.focus=ENIMultiIP`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTest(cmd.Context(), g, o, args, keep, crash)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().BoolVar(&keep, "keep", false, "leave the lab up afterwards (no machine comparison)")
	cmd.Flags().BoolVar(&crash, "crash", false, "SIGKILL the supervisor after the suites, so that down has to clean up after a crash")
	return cmd
}

func runTest(ctx context.Context, g *globals, o *upOptions, args []string, keep, crash bool) error {
	repo := o.repo
	if repo == "" {
		var err error
		if repo, err = prereq.FindRepo("."); err != nil {
			return err
		}
	}
	return withLab(ctx, g, o, keep, func(ctx context.Context, st *cluster.State) error {
		err := goTestScenarios(ctx, g, st, repo, args)
		if crash {
			printf(g.stdout, "killing the lab supervisor (pid %d) with SIGKILL: down must clean up after a crash\n", st.SupervisorPID)
			if kerr := syscall.Kill(st.SupervisorPID, syscall.SIGKILL); kerr != nil {
				return errors.Join(err, fmt.Errorf("kill the supervisor: %w", kerr))
			}
		}
		return err
	})
}

// goTestScenarios runs the scenario suites with the lab's tiers in the
// environment.
func goTestScenarios(ctx context.Context, g *globals, st *cluster.State, repo string, args []string) error {
	full := append([]string{"test", "-count=1", "-v", "-timeout", "30m", "./scenarios/..."}, args...)
	cmd := exec.CommandContext(ctx, "go", full...)
	// go test runs the test binary as its child: an interrupt must end
	// both, not leave the binary running against a lab that goes down.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Dir = repo
	cmd.Stdout, cmd.Stderr = g.stdout, g.stderr
	// Plain output: CI logs and pipes are not terminals.
	cmd.Env = append(append(os.Environ(), labEnv(st)...), "GINKGO_NO_COLOR=TRUE")
	printf(g.stdout, "running: go %v\n", full)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("scenario suites: %w", err)
	}
	return nil
}

// labEnv is what env prints, as environment entries.
func labEnv(st *cluster.State) []string {
	return []string{"KUBECONFIG=" + st.Kubeconfig, "FAKECLOUD_URL=" + st.FakecloudURL,
		"FAKECLOUD_ADMIN_TOKEN=" + st.AdminToken, "TERWAY_LAB_DIR=" + st.Dir}
}
