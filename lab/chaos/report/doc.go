// Package report is the chaos run's verdict and its record: the
// invariants a lab must hold after every fault plan, checked as pure
// functions over facts the engine collected, and the report written for
// each run and for all of them, as bench's report is (JSON, Markdown, SVG
// drawn by internal/linechart).
//
// # Invariants
//
// Each check takes facts and returns a Result whose Violations say, in
// one line each, what broke; Invariants.Check runs them all from Facts,
// skipping (with the reason) those whose facts were not collected:
//
//	faults-fired            every fault of the plan fired at least once
//	audit-clean             the four-source audit (lab/audit) is clean
//	                        within AuditWithin after the faults end, and
//	                        stays clean
//	unique-addresses        no address is held by two live pods
//	addresses-on-node-enis  every pod address is on an ENI attached to
//	                        (InUse on) its node's instance (ENI modes)
//	pods-ready              every workload pod is Ready within ReadyWithin
//	                        after the faults end (from the timeline)
//	connectivity            every connectivity check passed (lab/workload)
//	daemon-restarts         every daemon restart falls in a fault that
//	                        explains it (RestartCauses) on its node
//	machine-unchanged       the machine is as before `up` (lab/hostcheck)
//
// Run.Explain prints a violation as a person needs it: the plan and seed
// to replay, the message, the audit summary and the timeline up to the
// moment of the violation.
//
// # Report
//
// WriteRun writes one run under an output directory and refreshes the
// summary of every run found there:
//
//	DIR/<plan>-<seed>/run.json     the Run (WriteJSON; ReadJSON reads it)
//	DIR/<plan>-<seed>/run.md       the run for people (WriteMarkdown)
//	DIR/<plan>-<seed>/timeline.svg faults as bands behind pods Ready,
//	                               cloud calls per second by outcome,
//	                               throttled calls per second and daemon
//	                               restarts (TimelineSVG)
//	DIR/summary.md                 one row per run: plan, seed, duration,
//	                               faults injected, pods started,
//	                               violations, verdict (WriteSummary)
package report
