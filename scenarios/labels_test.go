package scenarios

// The catalogue's labels. Every spec carries exactly one kind label,
// which says when it runs, and the mode labels of the modes it is for:
//
//	smoke    what CI runs on every change (make test-lab)
//	feature  one product feature, end to end (make scenarios)
//	chaos    faults injected while the cluster works (make chaos)
//
// A mode label is the daemon mode's name (ENIMultiIP, ENIOnly, VPC), or
// any-mode for specs that hold in every mode. The make targets select
// "KIND && (MODE || any-mode)" on a lab of that mode; a spec still skips
// itself, saying why, when the cluster it finds is not of its mode.
const (
	// labelDualStack marks the specs that need a lab brought up with
	// --ip-stack dual; make scenarios runs them on one after the modes.
	labelDualStack = "dual-stack"

	labelSmoke   = "smoke"
	labelFeature = "feature"
	labelChaos   = "chaos"
	labelAnyMode = "any-mode"
)

// kindLabels are the kind labels; the catalogue test wants exactly one on
// every spec.
var kindLabels = []string{labelSmoke, labelFeature, labelChaos}
