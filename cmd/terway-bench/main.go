// Command terway-bench runs the allocation benchmarks of package bench
// (one node, comparisons of pool policies, the fleet simulation, the
// reproduction of Cilium's BenchmarkAllocDelay) against an in-process
// fakecloud, writes every result as JSON, renders Markdown and SVG plots,
// and checks results against a committed baseline. See bench/README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	allowLoopback()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand(os.Stdout, os.Stderr, os.Args[1:]).ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(1)
	}
}

// allowLoopback keeps an HTTP proxy from carrying the SDK's calls to the
// in-process fakecloud: the old SDK honours HTTP_PROXY even for 127.0.0.1.
func allowLoopback() {
	if os.Getenv("HTTP_PROXY")+os.Getenv("http_proxy") == "" {
		return
	}
	no := os.Getenv("NO_PROXY")
	if no != "" {
		no += ","
	}
	os.Setenv("NO_PROXY", no+"127.0.0.1,localhost")
}

// newRootCommand builds the command tree; args are the command line
// (without the program name), recorded in every result.
func newRootCommand(stdout, stderr io.Writer, args []string) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr, command: commandLine(args)}
	root := &cobra.Command{
		Use:   "terway-bench",
		Short: "Allocation benchmarks and the fleet simulation, offline against fakecloud",
		Long: `terway-bench runs terwayd (as a library) against an in-process fakecloud
over the real SDK on loopback and measures what allocation costs: AllocIP
latency as the CNI plugin sees it, time until every pod has an address, and
cloud calls by action and per pod. Every result is a JSON file recording the
command line, profile, seed, time scale, daemon configuration and machine.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "", "log the daemons and fakecloud to stderr at this level (debug, info, warn, error); default: no logs")
	root.AddCommand(newNodeCommand(g), newCompareCommand(g), newPeerCommand(g), newFleetCommand(g),
		newReportCommand(g), newCheckCommand(g))
	return root
}

// globals are what every subcommand shares.
type globals struct {
	stdout, stderr io.Writer
	command        string
	logLevel       string
}

func (g *globals) logger() (*slog.Logger, error) {
	if g.logLevel == "" {
		return nil, nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level})), nil
}

// commandLine is the command as a shell would take it back.
func commandLine(args []string) string {
	parts := []string{"terway-bench"}
	for _, a := range args {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// errPodsFailed marks a run whose result was written but in which some
// pods never got an address.
var errPodsFailed = errors.New("pods without an address")
