package admin

// OutcomeSuccess is the outcome recorded for a call that succeeded; any
// other outcome is the error code the caller received.
const OutcomeSuccess = "Success"

// Outcomes of metadata reads besides success and the HTTP status of a
// failure ("Http404").
const (
	// OutcomeStale is a read answered by a stale fault.
	OutcomeStale = "Stale"
	// OutcomeClientGone is a read whose client gave up while a pause or
	// latency fault held it: nothing was answered.
	OutcomeClientGone = "ClientGone"
)

// CallStat counts calls of one action by one caller with one outcome
// (GET /fakecloud/calls). Metadata reads are counted apart (GET
// /fakecloud/calls?service=metadata), with Service "metadata", Action the
// path under /latest/ with each ENI's MAC written "{mac}", InstanceID the
// reading instance, and Outcome Success, Stale, ClientGone or the HTTP
// status of a failure, e.g. "Http500".
type CallStat struct {
	Service     string `json:"service,omitempty"`
	Action      string `json:"action"`
	AccessKeyID string `json:"accessKeyId"`
	InstanceID  string `json:"instanceId,omitempty"`
	Outcome     string `json:"outcome"`
	Count       int64  `json:"count"`
}
