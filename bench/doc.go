// Package bench is the result format of the project's allocation
// benchmarks and fleet simulation: Result (schema 1), its JSON files
// (WriteJSON, ReadResults) and the machine and commit a result records.
// The benchmarks and their reports are its subpackages, each a piece:
//
//   - profile: the cloud latency profiles (default, fast, slow), data
//     applied to fakecloud as settings and latency faults.
//   - harness: fakecloud in this process serving its API on loopback, and
//     nodes (an instance with its own terwayd) added to it.
//   - node: the node scenarios (cold burst, warm churn, exhaustion,
//     throttled) on one harness node, and the pool policies they vary.
//   - peer: the reproduction of Cilium's BenchmarkAllocDelay.
//   - fleet: many daemons in this process against one fakecloud with
//     account-wide API budgets.
//   - report: the Markdown summary, the SVG plots (drawn by
//     internal/linechart) and the regression gate (Check).
//   - benchtest: hand-made results for the tests of this package and report.
//
// Command terway-bench runs them; bench/README.md says what they measure
// and how exact the figures are.
package bench
