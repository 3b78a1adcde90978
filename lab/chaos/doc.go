// Package chaos applies named, seeded fault plans to a running lab and
// undoes them: the chaos engine behind `terway-lab chaos` and the chaos
// scenario suites.
//
// A Plan is data (JSON, so users can write their own): a workload (a
// rollout of N pods), the invariants' time limits, and Steps that compose,
// each a fault Kind applied at a start offset for a duration to a target,
// with kind parameters. Resolve fixes every random choice of a plan with
// a seed — targets such as "random-node", kill moments, fakecloud's
// per-fault seeds and the fault names — into a Schedule, so the same seed
// replays the same schedule (outcomes can still differ with timing).
//
// An Engine runs a Schedule: it applies each step at its offset and undoes
// it at its end, removes every fault it installed when the run ends, also
// on failure, panic or cancellation, records a timeline of what it did
// when, and then proves that every step fired: cloud faults through
// fakecloud's call and fault accounting, process and node faults by what
// they did. A step that never fired fails the run, naming it.
//
// The engine reaches the lab through three narrow interfaces: Cloud
// (fakecloud's admin API), Lab (the supervisor's control of nodes and
// components) and Operator (out-of-band ECS calls with an operator's
// AccessKey; SDKOperator is the real one). The package uses fakecloud's
// admin client types, never the emulator.
//
// Catalogue holds the named plans, at least one per fault kind.
package chaos
