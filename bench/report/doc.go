// Package report turns benchmark results (package bench) into what
// people and the regression gate read: a Markdown summary (WriteMarkdown)
// with an index, side-by-side comparisons of the results that share a
// scenario and a section per result; SVG plots of every result's series
// and of each comparison (WritePlots, drawn by internal/linechart); and
// the gate itself (Check), which compares the machine-independent figures
// of a run with a committed baseline.
package report
