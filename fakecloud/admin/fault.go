package admin

// Fault kinds.
const (
	// FaultError fails matching calls before they change anything.
	FaultError = "error"
	// FaultLatency delays matching calls (Latency plus up to Jitter).
	FaultLatency = "latency"
	// FaultLostResponse applies the change, then answers with an error
	// (Lost "error", the default) or never answers (Lost "timeout") until
	// the client gives up.
	FaultLostResponse = "lost-response"
	// FaultPause holds matching calls at Step until the fault is removed.
	FaultPause = "pause"
	// FaultConsistency models eventual consistency, which ECS does not
	// document for CreateNetworkInterface (it is synchronous), so it is
	// opt-in: the ENI a matching CreateNetworkInterface call creates is
	// missing from DescribeNetworkInterfaces(Attribute) for Latency plus
	// up to Jitter.
	FaultConsistency = "consistency"
)

// Pause steps.
const (
	// StepBefore holds a call after authentication, before it changes
	// anything.
	StepBefore = "before"
	// StepAfter holds a call after its change is committed, before the
	// answer is sent.
	StepAfter = "after"
)

// Fault is one injected misbehaviour (POST /fakecloud/faults). Action and
// Caller select calls (empty matches all; Caller is an AccessKeyId or an
// instance ID). With Count > 0 the fault fires on the first Count matching
// calls of each caller after it was added; otherwise on each call with
// Probability (0 means always). Every decision is a function of (seed,
// fault name, action, caller, the caller's per-action call index), so
// concurrency between callers does not change which calls are hit, and
// a run with the same seed replays.
type Fault struct {
	Name        string   `json:"name,omitempty"`
	Kind        string   `json:"kind"`
	Action      string   `json:"action,omitempty"`
	Caller      string   `json:"caller,omitempty"`
	Probability float64  `json:"probability,omitempty"`
	Count       int      `json:"count,omitempty"`
	Code        string   `json:"code,omitempty"`
	Status      int      `json:"status,omitempty"`
	Message     string   `json:"message,omitempty"`
	Latency     Duration `json:"latency,omitempty"`
	Jitter      Duration `json:"jitter,omitempty"`
	Lost        string   `json:"lost,omitempty"`
	Step        string   `json:"step,omitempty"`
	// Seed, when not 0, replaces the emulator's seed (its --seed) in this
	// fault's decisions (which calls it hits, the jitter each gets), so
	// that a plan naming its faults' seeds replays the same fault
	// schedule on any emulator, whatever seed that was started with.
	Seed int64 `json:"seed,omitempty"`
}

// FaultStatus is an installed fault and how many calls it holds now
// (GET /fakecloud/faults).
type FaultStatus struct {
	Fault
	Held int `json:"held"`
}
