package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/report"
)

// summaryFile is the Markdown summary report writes into --out.
const summaryFile = "README.md"

func newReportCommand(g *globals) *cobra.Command {
	var in, out string
	cmd := &cobra.Command{
		Use:     "report",
		Short:   "Render the results of a directory as Markdown (" + summaryFile + ") and SVG plots",
		Example: `  terway-bench report --in bench/results --out bench/results`,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			rs, err := bench.ReadResults(in)
			if err != nil {
				return err
			}
			if len(rs) == 0 {
				return fmt.Errorf("no results (*.json) in %s", in)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			plots, err := report.WritePlots(filepath.Join(out, report.PlotsDir), rs)
			if err != nil {
				return err
			}
			var md bytes.Buffer
			if err := report.WriteMarkdown(&md, rs); err != nil {
				return err
			}
			path := filepath.Join(out, summaryFile)
			if err := os.WriteFile(path, md.Bytes(), 0o644); err != nil {
				return fmt.Errorf("write %s: %w", path, err)
			}
			fmt.Fprintf(g.stdout, "%d results: %s and %d plots in %s\n", len(rs), path, len(plots), filepath.Join(out, report.PlotsDir))
			return nil
		},
	}
	cmd.Flags().StringVar(&in, "in", "bench/results", "directory of JSON results")
	cmd.Flags().StringVar(&out, "out", "bench/results", "directory for "+summaryFile+" and "+report.PlotsDir+"/")
	return cmd
}

// errCheckFailed is returned when the gate fails (the report says why).
var errCheckFailed = errors.New("regression check failed")

func newCheckCommand(g *globals) *cobra.Command {
	var (
		baseline, current string
		tolerance         float64
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Compare current results with a baseline on machine-independent figures",
		Long: `check matches results by kind and name and fails when calls per pod,
mutating calls per pod, calls of any action, throttled calls or the ratio to
the lower bound changed by more than --tolerance, or when any pod failed.
Timing figures are printed as ratios and never fail.`,
		Example: `  terway-bench check --baseline bench/results --current /tmp/bench-now`,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			base, err := bench.ReadResults(baseline)
			if err != nil {
				return err
			}
			cur, err := bench.ReadResults(current)
			if err != nil {
				return err
			}
			rep, err := report.Check(base, cur, tolerance)
			if err != nil {
				return err
			}
			if _, err := rep.WriteTo(g.stdout); err != nil {
				return err
			}
			if rep.Failed() {
				return errCheckFailed
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&baseline, "baseline", "bench/results", "directory of the committed results")
	cmd.Flags().StringVar(&current, "current", "", "directory of the results to check")
	cmd.Flags().Float64Var(&tolerance, "tolerance", 0.10, "largest relative change of a gated figure that passes")
	_ = cmd.MarkFlagRequired("current")
	return cmd
}
