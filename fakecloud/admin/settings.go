package admin

// Settings are the emulator's behaviour knobs (GET and PUT
// /fakecloud/settings, and a world file's "settings"). Delays are in world
// time and scaled by the emulator's time scale; the throttle window is
// not. A change applies to the calls admitted after it: a throttle budget
// to the next call, a delay to the next transition that starts.
type Settings struct {
	AttachDelay     Duration `json:"attachDelay"`
	DetachDelay     Duration `json:"detachDelay"`
	DeleteDelay     Duration `json:"deleteDelay"`
	RouteEntryDelay Duration `json:"routeEntryDelay"`
	EIPDelay        Duration `json:"eipDelay"`
	MetadataLag     Duration `json:"metadataLag"`
	// ConsistencyWindow hides every ENI created through the API from
	// DescribeNetworkInterfaces(Attribute) this long. Default 0: ECS
	// documents CreateNetworkInterface as synchronous (the new ENI is
	// Available at once). A FaultConsistency opts in per call instead.
	ConsistencyWindow Duration `json:"consistencyWindow"`
	// ThrottleWindow is the length of a throttling window (default 60s).
	ThrottleWindow Duration `json:"throttleWindow"`
	// Throttle is the account-wide budget per action per window; key "*"
	// is the default for actions not listed; 0 means unlimited.
	Throttle map[string]int `json:"throttle"`
	// ThrottleCodes is the code a call over budget answers, per action;
	// key "*" for actions not listed: Throttling, Throttling.User (the
	// default) or Throttling.Api, all three of which the service answers.
	ThrottleCodes map[string]string `json:"throttleCodes"`
	// ExhaustionCode is what a dry vSwitch answers:
	// InvalidVSwitchId.IpNotEnough (default) or QuotaExceeded.PrivateIpAddress.
	ExhaustionCode string `json:"exhaustionCode"`
	// TimestampWindow is how far a request's signing time may be from now.
	TimestampWindow Duration `json:"timestampWindow"`
	// STSLifetime is how long RAM-role credentials stay valid.
	STSLifetime Duration `json:"stsLifetime"`
	// MaxENIs caps the ENIs of the account (0 = no cap).
	MaxENIs int `json:"maxEnis"`
}
