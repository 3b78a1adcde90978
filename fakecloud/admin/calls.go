package admin

// OutcomeSuccess is the outcome recorded for a call that succeeded; any
// other outcome is the error code the caller received.
const OutcomeSuccess = "Success"

// CallStat counts calls of one action by one caller with one outcome
// (GET /fakecloud/calls).
type CallStat struct {
	Action      string `json:"action"`
	AccessKeyID string `json:"accessKeyId"`
	InstanceID  string `json:"instanceId,omitempty"`
	Outcome     string `json:"outcome"`
	Count       int64  `json:"count"`
}
