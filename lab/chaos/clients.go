package chaos

import (
	"context"
	"net/netip"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// Cloud is what the engine needs of fakecloud's admin API: faults,
// settings, vSwitch drain and refill, and the world and call accounting
// it chooses targets from and proves faults with.
type Cloud interface {
	AddFault(ctx context.Context, f Fault) (string, error)
	RemoveFault(ctx context.Context, name string) error
	Faults(ctx context.Context) ([]admin.FaultStatus, error)
	Settings(ctx context.Context) (Settings, error)
	// UpdateSettings merges the fields set in s onto the current
	// settings (and the keys of its maps onto the current maps).
	UpdateSettings(ctx context.Context, s Settings) error
	// DrainVSwitch takes the vSwitch's free addresses away but leave.
	DrainVSwitch(ctx context.Context, id string, leave int) error
	// RefillVSwitch gives back what DrainVSwitch took.
	RefillVSwitch(ctx context.Context, id string) error
	World(ctx context.Context) (*admin.WorldView, error)
	Calls(ctx context.Context) ([]admin.CallStat, error)
}

// Fault is a fakecloud fault as the engine installs it: admin.Fault with
// the fields branch chaos-cloud adds to it (Service, Seed). Once that
// branch is merged, this becomes admin.Fault.
type Fault struct {
	admin.Fault
	// Service is "" (the ECS/VPC API) or ServiceMetadata.
	Service string `json:"service,omitempty"`
	// Seed decides which calls the fault hits, instead of fakecloud's own
	// seed, so that a schedule replays its faults.
	Seed int64 `json:"seed,omitempty"`
}

// ServiceMetadata is Fault.Service for the metadata service.
const ServiceMetadata = "metadata"

// FaultStale is the fault kind of stale metadata answers (added to
// fakecloud/admin by branch chaos-cloud).
const FaultStale = "stale"

// Settings are the part of fakecloud's settings the engine changes. In
// an update, nil and empty fields are left as they are.
type Settings struct {
	AttachDelay *admin.Duration `json:"attachDelay,omitempty"`
	DetachDelay *admin.Duration `json:"detachDelay,omitempty"`
	// ThrottleWindow is the length of a throttle window (world time is
	// not applied to it).
	ThrottleWindow *admin.Duration `json:"throttleWindow,omitempty"`
	// Throttle is the budget per action per window; key "*" is the
	// default; 0 means unlimited.
	Throttle map[string]int `json:"throttle,omitempty"`
	// ThrottleCodes is what a throttled call answers, per action ("*":
	// default).
	ThrottleCodes map[string]string `json:"throttleCodes,omitempty"`
	// ExhaustionCode is what a dry vSwitch answers.
	ExhaustionCode string `json:"exhaustionCode,omitempty"`
}

// budget is the throttle budget of action under s.
func (s Settings) budget(action string) int {
	if n, ok := s.Throttle[action]; ok {
		return n
	}
	return s.Throttle["*"]
}

// throttleCode is what a throttled call of action answers under s.
func (s Settings) throttleCode(action string) string {
	if c, ok := s.ThrottleCodes[action]; ok && c != "" {
		return c
	}
	if c := s.ThrottleCodes["*"]; c != "" {
		return c
	}
	return "Throttling.User"
}

// exhaustionCode is what a dry vSwitch answers under s.
func (s Settings) exhaustionCode() string {
	if s.ExhaustionCode != "" {
		return s.ExhaustionCode
	}
	return "InvalidVSwitchId.IpNotEnough"
}

// Lab is the lab supervisor's control of nodes and components.
type Lab interface {
	// StopNode powers a node's instance off: its kubelet, containerd and
	// pods are killed, its disks kept, its ENIs unplugged.
	StopNode(ctx context.Context, node string) error
	// StartNode powers it on again.
	StartNode(ctx context.Context, node string) error
	// ReleaseNode releases the node's instance and deletes its Node
	// object, as cloud-controller-manager would.
	ReleaseNode(ctx context.Context, node string) error
	// Kill kills component (ComponentTerwayd, ComponentContainerd,
	// ComponentKubelet or ComponentAPIServer with node "") with SIGKILL;
	// the supervisor starts it again after downtime (kubelet restarts
	// terwayd's container itself).
	Kill(ctx context.Context, component, node string, downtime time.Duration) error
}

// Operator is what an operator does from the console, out of band:
// through the ordinary ECS API with an AccessKey of the account.
type Operator interface {
	DetachENI(ctx context.Context, eniID, instanceID string) error
	// DeleteENI deletes an ENI, detaching it first if it is attached.
	DeleteENI(ctx context.Context, eniID string) error
	UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error
}

// Node is one node of the lab as the engine targets it.
type Node struct {
	Name       string `json:"name"`
	InstanceID string `json:"instanceId"`
}
