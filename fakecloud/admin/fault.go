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
	// FaultStale (metadata only) answers matching metadata reads as the
	// instance's metadata was when the fault was added: ENIs attached and
	// addresses assigned since are missing, those detached or unassigned
	// since are still listed, until the fault is removed. RAM-role
	// credentials stay current.
	FaultStale = "stale"
)

// Services a fault applies to (Fault.Service).
const (
	// ServiceAPI is the ECS and VPC OpenAPI; an empty Service means it
	// too.
	ServiceAPI = "api"
	// ServiceMetadata is the instance metadata service
	// (http://100.100.100.200/latest/).
	ServiceMetadata = "metadata"
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

// Fault is one injected misbehaviour (POST /fakecloud/faults).
//
// Service says what it applies to. On the API ("" or "api"), Action is an
// action name and Caller an AccessKeyId or instance ID; every kind but
// stale applies. On the metadata service ("metadata"), Action is a path
// prefix under /latest/ (e.g. "meta-data/network/interfaces/macs"; the
// token PUT is "api/token") and Caller the instance ID a read is
// attributed to; the kinds are error (Status, default 500, answered with
// the service's HTML error page), latency, pause (the read hangs until
// the fault is removed or its client gives up) and stale. Empty Action or
// Caller matches all. Kinds, or fields, that mean nothing for a service
// are refused when the fault is added.
//
// With Count > 0 the fault fires on the first Count matching calls of
// each caller after it was added (per action; on the metadata service per
// path, MACs counting as one); otherwise on each call with Probability (0
// means always). Every decision is a function of (seed, fault name,
// action or path, caller, the caller's call index there), so concurrency
// between callers does not change which calls are hit, and a run with the
// same seed replays.
type Fault struct {
	Name        string   `json:"name,omitempty"`
	Kind        string   `json:"kind"`
	Service     string   `json:"service,omitempty"`
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

// FaultStatus is an installed fault, how many calls it holds now and
// how many it has hit since it was added (GET /fakecloud/faults): a
// chaos run reads Fired to prove that its faults took effect, latency
// and stale ones included, whose calls succeed.
type FaultStatus struct {
	Fault
	Held  int   `json:"held"`
	Fired int64 `json:"fired"`
}
